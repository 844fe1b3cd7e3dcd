#include "lessons/13-control/faults.h"
