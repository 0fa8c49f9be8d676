// Every header declaring a primitive class of the library: for the files
// that expand fluxion/primitive_list.h over the classes themselves (the
// kernels of backend/no_gpu/primitives.cpp and
// backend/cpu/missing_kernels.cpp, export_registry.cpp's import table).
#pragma once

#include "fluxion/compiled.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/conv.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/custom.h"
#include "fluxion/ops/custom_kernel.h"
#include "fluxion/ops/distributed.h"
#include "fluxion/ops/hadamard.h"
#include "fluxion/ops/layout.h"
#include "fluxion/ops/matmul_variants.h"
#include "fluxion/ops/searchsorted.h"
#include "fluxion/ops/fast.h"
#include "fluxion/ops/fft.h"
#include "fluxion/ops/gather_scatter.h"
#include "fluxion/ops/indexing.h"
#include "fluxion/ops/io.h"
#include "fluxion/ops/linalg.h"
#include "fluxion/ops/linalg_lapack.h"
#include "fluxion/ops/astype.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/quantized.h"
#include "fluxion/ops/random.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/sort.h"
#include "fluxion/ops/unary.h"
#include "fluxion/primitive_list.h"
