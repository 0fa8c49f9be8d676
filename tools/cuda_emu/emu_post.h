// Included after kernels.cuh (see shim.h).
#undef FLUXION_SHARED_ARRAY
#define FLUXION_SHARED_ARRAY(T, name, n)                         \
  alignas(T) static unsigned char name##_bytes[sizeof(T) * (n)]; \
  T* name = reinterpret_cast<T*>(name##_bytes)
