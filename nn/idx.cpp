// placeholder: being written
#include "nn/idx.h"
namespace nn { bool idx_gzip_supported() { return false; } }
