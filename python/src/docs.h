// Pieces of docstrings shared by many bindings (issue 18): the arguments
// that most ops take alike, written once. They are string literals, so a
// binding's docstring is one literal built by concatenation, e.g.
//   FXDOC_ARGS FXDOC_A FXDOC_STREAM FXDOC_RETURNS "    array: ..."
#pragma once

#define FXDOC_ARGS "\n\nArgs:\n"
#define FXDOC_RETURNS "\nReturns:\n"
#define FXDOC_EXAMPLE "\nExample:\n"
#define FXDOC_A "    a (array): Input array (or a Python scalar).\n"
#define FXDOC_AB                                                    \
  "    a (array or scalar): First operand.\n"                       \
  "    b (array or scalar): Second operand; ``a`` and ``b`` are\n" \
  "        broadcast together and promoted to a common dtype (a Python\n" \
  "        scalar takes the dtype of the array operand).\n"
#define FXDOC_STREAM                                                   \
  "    stream (Stream or Device, optional): Where the op runs; the\n" \
  "        default stream of the default device when omitted.\n"
#define FXDOC_KEY                                                       \
  "    key (array, optional): A PRNG key (see :func:`key`); the next key\n" \
  "        of the global state (``mx.random.state``) when omitted.\n"
#define FXDOC_AXIS_REDUCE                                              \
  "    axis (int or list(int), optional): Axis or axes to reduce; all\n" \
  "        axes when omitted.\n"                                      \
  "    keepdims (bool, optional): Keep the reduced axes as size 1.\n"  \
  "        Default ``False``.\n"
#define FXDOC_DTYPE_OPT                                                  \
  "    dtype (Dtype, optional): Type of the result; ``float32`` when\n" \
  "        omitted.\n"
#define FXDOC_RET_ARRAY "\nReturns:\n    array: "
