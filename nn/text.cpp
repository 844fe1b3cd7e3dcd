// nn/text.cpp: see nn/text.h. (Being written: issue 4.)
#include "nn/text.h"
