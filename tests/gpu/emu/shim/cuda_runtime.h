/* cuda_runtime.h — see cuda_runtime_api.h in this folder. */
#ifndef SV_EMU_SHIM_CUDA_RUNTIME_H
#define SV_EMU_SHIM_CUDA_RUNTIME_H
#include "cuda_runtime_api.h"
#endif
