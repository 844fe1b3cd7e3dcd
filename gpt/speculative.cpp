// gpt/speculative.cpp: see gpt/speculative.h (being written: issue 8).
#include "gpt/speculative.h"
