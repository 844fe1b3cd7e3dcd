// gpt/infer.cpp: see gpt/infer.h (being written: issue 8).
#include "gpt/infer.h"
