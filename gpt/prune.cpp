// gpt/prune.cpp: see gpt/prune.h (being written: issue 8).
#include "gpt/prune.h"
