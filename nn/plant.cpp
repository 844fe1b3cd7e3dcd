// nn/plant.cpp: see nn/plant.h. (Being written: issue 4.)
#include "nn/plant.h"
