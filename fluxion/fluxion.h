// The umbrella header: everything public in Fluxion.
#pragma once

#include "fluxion/allocator.h"
#include "fluxion/array.h"
#include "fluxion/device.h"
#include "fluxion/dtype.h"
#include "fluxion/graph_utils.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/indexing.h"
#include "fluxion/ops/linalg.h"
#include "fluxion/ops/misc.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/shape.h"
#include "fluxion/ops/unary.h"
#include "fluxion/ops/random.h"
#include "fluxion/primitive.h"
#include "fluxion/transforms.h"
