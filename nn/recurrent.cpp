// nn/recurrent.cpp: see nn/recurrent.h. (Being written: issue 4.)
#include "nn/recurrent.h"
