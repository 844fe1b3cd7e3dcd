// app/info.h: `nnlab info`, what this build and machine offer.
#pragma once

namespace app {
int run_info();
}
