// The MPI backend of mx.distributed, on Open MPI loaded at run time.
//
// libmpi is dlopen'ed (libmpi.so.40, Open MPI 4's soname, else libmpi.so)
// and its functions resolved with dlsym, so Fluxion builds without MPI's
// headers and runs where MPI is absent. The few types are declared here
// with Open MPI's ABI (its mpi.h): handles are pointers to its objects, and
// the predefined handles (MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM...) are the
// addresses of its global objects (ompi_mpi_comm_world, ompi_mpi_float,
// ompi_mpi_op_sum...), resolved with dlsym too. MPICH's ABI differs
// (integer handles); it is not supported.
//
// Reductions: MPI's own operations where they mean what Fluxion's
// reductions mean (sum of integers, floats and complex; max and min of
// integers; "or" / "and" for bool); user operations (MPI_Op_create) for the
// rest, combined as Fluxion's reductions are (combine_on_host): float16 and
// bfloat16 are combined in float32 and rounded back at each step (the bytes
// travel as 16-bit words, so bandwidth is that of the dtype), and max/min of
// floats and complex values propagate NaN and order complex values as
// Fluxion's max does.
//
// Timeouts: with FLUXION_DIST_TIMEOUT set, each transfer is started
// nonblocking (MPI_Iallreduce...) and polled with MPI_Test until done or the
// deadline, when it raises naming the collective and the ranks. The
// unfinished request keeps its buffers alive (MPI may still write them) and
// this process then skips MPI_Finalize at exit, which could wait for it.
// Without a timeout the blocking calls are used (the fastest: what mpi4py
// calls); a peer that dies makes mpirun abort the whole job then.
//
// Cross-rank check (FLUXION_DIST_CHECK, on by default): each collective
// first gathers every rank's descriptor (collective, dtype, shape) and
// raises on a mismatch on every rank; a send is preceded by its
// descriptor, which the receiver compares with what it expects.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "fluxion/distributed_comm.h"
#include "fluxion/types.h"

namespace fluxion::distributed::detail {

namespace {

// Open MPI's handle types (opaque pointers) and constants (its mpi.h).
using MPI_Comm = void*;
using MPI_Datatype = void*;
using MPI_Op = void*;
using MPI_Request = void*;
using MPI_Errhandler = void*;
using MPI_User_function = void(void*, void*, int*, MPI_Datatype*);
struct MPI_Status {  // ompi_status_public_t
  int MPI_SOURCE, MPI_TAG, MPI_ERROR, cancelled;
  size_t ucount;
};
constexpr int MPI_SUCCESS = 0;
constexpr int MPI_THREAD_MULTIPLE = 3;
constexpr int MPI_MAX_ERROR_STRING = 256;
void* const MPI_IN_PLACE = reinterpret_cast<void*>(1);
MPI_Status* const MPI_STATUS_IGNORE = nullptr;

// The functions and global objects used, resolved once.
struct Lib {
  void* handle = nullptr;
  std::string error;  // why it could not be loaded
#define FLUXION_MPI_FUNCTIONS(X)                                              \
  X(MPI_Initialized, int(int*))                                               \
  X(MPI_Finalized, int(int*))                                                 \
  X(MPI_Init_thread, int(int*, char***, int, int*))                           \
  X(MPI_Finalize, int())                                                      \
  X(MPI_Comm_rank, int(MPI_Comm, int*))                                       \
  X(MPI_Comm_size, int(MPI_Comm, int*))                                       \
  X(MPI_Comm_split, int(MPI_Comm, int, int, MPI_Comm*))                       \
  X(MPI_Comm_set_errhandler, int(MPI_Comm, MPI_Errhandler))                   \
  X(MPI_Error_string, int(int, char*, int*))                                  \
  X(MPI_Op_create, int(MPI_User_function*, int, MPI_Op*))                     \
  X(MPI_Allreduce,                                                            \
    int(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm))             \
  X(MPI_Iallreduce, int(const void*, void*, int, MPI_Datatype, MPI_Op,        \
                        MPI_Comm, MPI_Request*))                              \
  X(MPI_Allgather,                                                            \
    int(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, MPI_Comm))  \
  X(MPI_Iallgather, int(const void*, int, MPI_Datatype, void*, int,           \
                        MPI_Datatype, MPI_Comm, MPI_Request*))                \
  X(MPI_Reduce_scatter_block,                                                 \
    int(const void*, void*, int, MPI_Datatype, MPI_Op, MPI_Comm))             \
  X(MPI_Ireduce_scatter_block, int(const void*, void*, int, MPI_Datatype,     \
                                   MPI_Op, MPI_Comm, MPI_Request*))           \
  X(MPI_Send, int(const void*, int, MPI_Datatype, int, int, MPI_Comm))        \
  X(MPI_Isend,                                                                \
    int(const void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*))    \
  X(MPI_Recv, int(void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status*)) \
  X(MPI_Irecv,                                                                \
    int(void*, int, MPI_Datatype, int, int, MPI_Comm, MPI_Request*))          \
  X(MPI_Test, int(MPI_Request*, int*, MPI_Status*))                           \
  X(MPI_Abort, int(MPI_Comm, int))
// X(field, suffix): the object ompi_mpi_<suffix>.
// clang-format off
#define FLUXION_MPI_OBJECTS(X)     \
  X(comm_world, comm_world)        \
  X(errors_return, errors_return)  \
  X(op_sum, op_sum)                \
  X(op_max, op_max)                \
  X(op_min, op_min)                \
  X(op_lor, op_lor)                \
  X(op_land, op_land)              \
  X(t_bool, c_bool)                \
  X(t_int8, int8_t)                \
  X(t_uint8, uint8_t)              \
  X(t_int16, int16_t)              \
  X(t_uint16, uint16_t)            \
  X(t_int32, int32_t)              \
  X(t_uint32, uint32_t)            \
  X(t_int64, int64_t)              \
  X(t_uint64, uint64_t)            \
  X(t_float, float)                \
  X(t_double, double)              \
  X(t_complex64, c_float_complex)
// clang-format on
#define FLUXION_MPI_FIELD(NAME, SIG) std::add_pointer_t<SIG> NAME = nullptr;
  FLUXION_MPI_FUNCTIONS(FLUXION_MPI_FIELD)
#define FLUXION_MPI_OBJECT_FIELD(NAME, SUFFIX) void* NAME = nullptr;
  FLUXION_MPI_OBJECTS(FLUXION_MPI_OBJECT_FIELD)

  Lib() {
    // RTLD_GLOBAL: Open MPI's own plugins (mca_*.so) link against the
    // symbols of libmpi / libopen-pal that they expect to find loaded.
    for (const char* so : {"libmpi.so.40", "libmpi.so"}) {
      handle = dlopen(so, RTLD_NOW | RTLD_GLOBAL);
      if (handle) {
        break;
      }
    }
    if (!handle) {
      error = std::string("cannot load libmpi (") + dlerror() + ")";
      return;
    }
    auto sym = [&](const char* name) {
      void* p = dlsym(handle, name);
      if (!p && error.empty()) {
        error = std::string("libmpi lacks ") + name +
                " (Fluxion needs Open MPI 4 or later)";
      }
      return p;
    };
#define FLUXION_MPI_RESOLVE(NAME, SIG) \
  NAME = reinterpret_cast<std::add_pointer_t<SIG>>(sym(#NAME));
    FLUXION_MPI_FUNCTIONS(FLUXION_MPI_RESOLVE)
#define FLUXION_MPI_RESOLVE_OBJECT(NAME, SUFFIX) \
  NAME = sym("ompi_mpi_" #SUFFIX);
    FLUXION_MPI_OBJECTS(FLUXION_MPI_RESOLVE_OBJECT)
    if (!error.empty()) {
      dlclose(handle);
      handle = nullptr;
    }
  }
};

Lib& lib() {
  static Lib* l = new Lib();  // never destroyed: MPI_Finalize runs at exit
  return *l;
}

// Transfers left unfinished by a timeout: their buffers stay alive (MPI may
// still write them); at exit MPI_Finalize runs only if they have completed
// since (a late peer), as it could wait for them forever otherwise.
struct Abandoned {
  MPI_Request request;
  std::vector<array> buffers;
  std::shared_ptr<void> memory;  // headers, descriptors, scratch
};
std::mutex abandoned_mutex;
std::vector<Abandoned>& abandoned() {
  static auto* v = new std::vector<Abandoned>();
  return *v;
}

void finalize_at_exit() {
  auto& l = lib();
  int finalized = 0;
  l.MPI_Finalized(&finalized);
  std::lock_guard<std::mutex> lock(abandoned_mutex);
  bool pending = false;
  for (auto& a : abandoned()) {
    int done = 0;
    if (a.request &&
        l.MPI_Test(&a.request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
        !done) {
      pending = true;
    }
  }
  if (!finalized && !pending) {
    l.MPI_Finalize();
  }
}

// A transfer that reached FLUXION_DIST_TIMEOUT (RuntimeError in Python).
struct TimedOut : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// User reductions: inout[i] = r(inout[i], in[i]) as Fluxion's reductions
// combine (the CPU backend's functors, through combine_on_host).
template <typename T, ReduceOp R>
void user_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  combine_on_host(R, dtype_of<T>, in, inout, static_cast<size_t>(*len));
}

class MpiComm : public Comm {
 public:
  MpiComm(MPI_Comm comm) : comm_(comm) {
    auto& l = lib();
    check("init", l.MPI_Comm_set_errhandler(comm_, l.errors_return));
    check("init", l.MPI_Comm_rank(comm_, &rank_));
    check("init", l.MPI_Comm_size(comm_, &size_));
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::shared_ptr<Comm> split(int color, int key) override {
    MPI_Comm sub = nullptr;
    check("Group.split",
          lib().MPI_Comm_split(comm_, color, key < 0 ? rank_ : key, &sub));
    return std::make_shared<MpiComm>(sub);
  }

  void all_reduce(const char* op, const array& in, array& out,
                  ReduceOp r) override {
    auto [type, mop] = reduction(op, in.dtype(), r);
    int n = count(op, in.size());
    const void* src =
        in.data<void>() == out.data<void>() ? MPI_IN_PLACE : in.data<void>();
    auto& l = lib();
    checked(
        op, "", {in, out}, [&] { verify(op, in); },
        [&] {
          return l.MPI_Allreduce(src, out.data<void>(), n, type, mop, comm_);
        },
        [&](MPI_Request* q) {
          return l.MPI_Iallreduce(src, out.data<void>(), n, type, mop, comm_,
                                  q);
        });
  }

  void all_gather(const char* op, const array& in, array& out) override {
    auto type = datatype(op, in.dtype());
    int n = count(op, in.size());
    auto& l = lib();
    checked(
        op, "", {in, out}, [&] { verify(op, in); },
        [&] {
          return l.MPI_Allgather(in.data<void>(), n, type, out.data<void>(), n,
                                 type, comm_);
        },
        [&](MPI_Request* q) {
          return l.MPI_Iallgather(in.data<void>(), n, type, out.data<void>(), n,
                                  type, comm_, q);
        });
  }

  void sum_scatter(const char* op, const array& in, array& out) override {
    auto [type, mop] = reduction(op, in.dtype(), ReduceOp::sum);
    int n = count(op, out.size());
    auto& l = lib();
    checked(
        op, "", {in, out}, [&] { verify(op, in); },
        [&] {
          return l.MPI_Reduce_scatter_block(in.data<void>(), out.data<void>(),
                                            n, type, mop, comm_);
        },
        [&](MPI_Request* q) {
          return l.MPI_Ireduce_scatter_block(in.data<void>(), out.data<void>(),
                                             n, type, mop, comm_, q);
        });
  }

  void send(const char* op, const array& in, int dst) override {
    auto type = datatype(op, in.dtype());
    int n = count(op, in.size());
    auto& l = lib();
    std::string peer = " to rank " + std::to_string(dst);
    auto header = [&] {
      if (!check_enabled(true)) {
        return;
      }
      // A header first, which the receiver checks against what it expects.
      auto d = std::make_shared<Descriptor>(describe(op, in));
      transfer(
          op, peer, {},
          [&] {
            return l.MPI_Send(d->data(), kDescriptorLength, l.t_int64, dst,
                              kHeaderTag, comm_);
          },
          [&](MPI_Request* q) {
            return l.MPI_Isend(d->data(), kDescriptorLength, l.t_int64, dst,
                               kHeaderTag, comm_, q);
          },
          d);
    };
    checked(
        op, peer, {in}, header,
        [&] { return l.MPI_Send(in.data<void>(), n, type, dst, 0, comm_); },
        [&](MPI_Request* q) {
          return l.MPI_Isend(in.data<void>(), n, type, dst, 0, comm_, q);
        });
  }

  void recv(const char* op, array& out, int src) override {
    auto type = datatype(op, out.dtype());
    int n = count(op, out.size());
    auto& l = lib();
    std::string peer = " from rank " + std::to_string(src);
    auto header = [&] {
      if (!check_enabled(true)) {
        return;
      }
      auto sent = std::make_shared<Descriptor>();
      transfer(
          op, peer, {},
          [&] {
            return l.MPI_Recv(sent->data(), kDescriptorLength, l.t_int64, src,
                              kHeaderTag, comm_, MPI_STATUS_IGNORE);
          },
          [&](MPI_Request* q) {
            return l.MPI_Irecv(sent->data(), kDescriptorLength, l.t_int64,
                               src, kHeaderTag, comm_, q);
          },
          sent);
      Descriptor expected = describe(op, out);
      if (!std::equal(sent->begin() + 1, sent->end(), expected.begin() + 1)) {
        drain(op, *sent, src);
        check_transfer(op, *sent, expected, src, rank_);
      }
    };
    checked(
        op, peer, {out}, header,
        [&] {
          return l.MPI_Recv(out.data<void>(), n, type, src, 0, comm_,
                            MPI_STATUS_IGNORE);
        },
        [&](MPI_Request* q) {
          return l.MPI_Irecv(out.data<void>(), n, type, src, 0, comm_, q);
        });
  }

 private:
  std::string where() const {
    return "rank " + std::to_string(rank_) + " of a group of " +
           std::to_string(size_);
  }

  void check(const char* op, int rc) const {
    if (rc == MPI_SUCCESS) {
      return;
    }
    char msg[MPI_MAX_ERROR_STRING] = {0};
    int len = 0;
    lib().MPI_Error_string(rc, msg, &len);
    throw std::runtime_error(std::string("[") + op + "] MPI failed on " +
                             where() + ": " + msg);
  }

  static int count(const char* op, size_t n) {
    if (n > static_cast<size_t>(INT_MAX)) {
      throw std::invalid_argument(std::string("[") + op +
                                  "] Arrays of more than 2^31 - 1 elements "
                                  "cannot be sent over MPI; split it.");
    }
    return static_cast<int>(n);
  }

  // Runs `check` (the cross-rank check's transfers), then the data
  // transfer. When the check times out, the data transfer is still started
  // and abandoned with it: the late peers then find on this rank the same
  // sequence of messages as the others sent, and the group works on.
  template <typename Check, typename Blocking, typename Start>
  void checked(const char* op, const std::string& peer,
               std::vector<array> buffers, Check check, Blocking blocking,
               Start start) {
    try {
      check();
    } catch (const TimedOut&) {
      MPI_Request req = nullptr;
      if (start(&req) == MPI_SUCCESS) {
        std::lock_guard<std::mutex> lock(abandoned_mutex);
        abandoned().push_back({req, std::move(buffers), nullptr});
      }
      throw;
    }
    transfer(op, peer, std::move(buffers), blocking, start);
  }

  // Point-to-point headers travel with this tag, the data with tag 0.
  static constexpr int kHeaderTag = 1;

  // The cross-rank check of a collective's arguments (FLUXION_DIST_CHECK):
  // every rank's descriptor gathered (one small collective), compared on
  // every rank, so that all raise together.
  void verify(const char* op, const array& x) {
    if (!check_enabled(true) || size_ == 1) {
      return;
    }
    // Heap memory: a request abandoned at its deadline keeps it.
    auto mem = std::make_shared<std::vector<Descriptor>>(size_ + 1);
    Descriptor* mine = mem->data() + size_;
    *mine = describe(op, x);
    auto& l = lib();
    transfer(
        op, "", {},
        [&] {
          return l.MPI_Allgather(mine->data(), kDescriptorLength, l.t_int64,
                                 mem->data(), kDescriptorLength, l.t_int64,
                                 comm_);
        },
        [&](MPI_Request* q) {
          return l.MPI_Iallgather(mine->data(), kDescriptorLength, l.t_int64,
                                  mem->data(), kDescriptorLength, l.t_int64,
                                  comm_, q);
        },
        mem);
    mem->pop_back();
    check_descriptors(op, *mem, rank_);
  }

  // A mismatched message is still received (into scratch memory of the
  // sender's size), so that the sender is not left waiting in MPI_Send.
  void drain(const char* op, const Descriptor& sent, int src) {
    auto& l = lib();
    size_t bytes = static_cast<size_t>(std::max<int64_t>(sent[4], 0)) *
                   static_cast<size_t>(std::max<int64_t>(sent[2], 0));
    int n = count(op, bytes);
    auto scratch = std::make_shared<std::vector<char>>(std::max<size_t>(bytes, 1));
    transfer(
        op, " from rank " + std::to_string(src), {},
        [&] {
          return l.MPI_Recv(scratch->data(), n, l.t_uint8, src, 0, comm_,
                            MPI_STATUS_IGNORE);
        },
        [&](MPI_Request* q) {
          return l.MPI_Irecv(scratch->data(), n, l.t_uint8, src, 0, comm_, q);
        },
        scratch);
  }

  // The blocking call, or with a timeout the nonblocking one polled until
  // the deadline. `keep` owns host memory that is not an array (headers,
  // descriptors), kept with the buffers of a request abandoned at its
  // deadline.
  template <typename Blocking, typename Start>
  void transfer(const char* op, const std::string& peer,
                std::vector<array> buffers, Blocking blocking, Start start,
                std::shared_ptr<void> keep = nullptr) {
    double limit = timeout_seconds();
    if (limit <= 0) {
      check(op, blocking());
      return;
    }
    MPI_Request req = nullptr;
    check(op, start(&req));
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(limit);
    int done = 0;
    // Spin briefly (small messages complete in microseconds), then sleep
    // between polls so that a waiting rank leaves the cores to its peers.
    for (int polls = 0;; ++polls) {
      check(op, lib().MPI_Test(&req, &done, MPI_STATUS_IGNORE));
      if (done) {
        return;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        break;
      }
      if (polls > 1000) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      } else {
        std::this_thread::yield();
      }
    }
    {
      std::lock_guard<std::mutex> lock(abandoned_mutex);
      abandoned().push_back({req, std::move(buffers), std::move(keep)});
    }
    throw TimedOut(
        std::string("[") + op + "] Timed out after " + std::to_string(limit) +
        " s (FLUXION_DIST_TIMEOUT) on " + where() + peer +
        ": a peer did not take part (it failed, exited or is elsewhere).");
  }

  MPI_Datatype datatype(const char* op, Dtype t) const {
    auto& l = lib();
    switch (t) {
      case Dtype::Val::bool_:
        return l.t_bool;
      case Dtype::Val::int8:
        return l.t_int8;
      case Dtype::Val::uint8:
        return l.t_uint8;
      case Dtype::Val::int16:
        return l.t_int16;
      case Dtype::Val::uint16:
      case Dtype::Val::float16:
      case Dtype::Val::bfloat16:
        return l.t_uint16;
      case Dtype::Val::int32:
        return l.t_int32;
      case Dtype::Val::uint32:
        return l.t_uint32;
      case Dtype::Val::int64:
        return l.t_int64;
      case Dtype::Val::uint64:
        return l.t_uint64;
      case Dtype::Val::float32:
        return l.t_float;
      case Dtype::Val::float64:
        return l.t_double;
      case Dtype::Val::complex64:
        return l.t_complex64;
    }
    throw std::invalid_argument(std::string("[") + op + "] Unsupported dtype.");
  }

  std::pair<MPI_Datatype, MPI_Op> reduction(const char* op, Dtype t,
                                            ReduceOp r) const;

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

// User operations, created once: [dtype][max, min] for floats and complex,
// [half dtype][sum] too.
struct UserOps {
  MPI_Op f16[3], bf16[3], f32[2], f64[2], c64[2];
  UserOps() {
    auto& l = lib();
    auto make = [&](MPI_User_function* f) {
      MPI_Op op = nullptr;
      if (l.MPI_Op_create(f, 1, &op) != MPI_SUCCESS) {
        throw std::runtime_error("[distributed.init] MPI_Op_create failed.");
      }
      return op;
    };
    constexpr auto sum = ReduceOp::sum, max = ReduceOp::max,
                   min = ReduceOp::min;
    f16[0] = make(user_reduce<float16_t, sum>);
    f16[1] = make(user_reduce<float16_t, max>);
    f16[2] = make(user_reduce<float16_t, min>);
    bf16[0] = make(user_reduce<bfloat16_t, sum>);
    bf16[1] = make(user_reduce<bfloat16_t, max>);
    bf16[2] = make(user_reduce<bfloat16_t, min>);
    f32[0] = make(user_reduce<float, max>);
    f32[1] = make(user_reduce<float, min>);
    f64[0] = make(user_reduce<double, max>);
    f64[1] = make(user_reduce<double, min>);
    c64[0] = make(user_reduce<complex64_t, max>);
    c64[1] = make(user_reduce<complex64_t, min>);
  }
};

UserOps& user_ops() {
  static UserOps* ops = new UserOps();
  return *ops;
}

std::pair<MPI_Datatype, MPI_Op> MpiComm::reduction(const char* op, Dtype t,
                                                   ReduceOp r) const {
  auto& l = lib();
  auto& u = user_ops();
  MPI_Datatype type = datatype(op, t);
  int i = static_cast<int>(r);  // sum 0, max 1, min 2
  switch (t) {
    case Dtype::Val::bool_:
      return {type, r == ReduceOp::min ? l.op_land : l.op_lor};
    case Dtype::Val::float16:
      return {type, u.f16[i]};
    case Dtype::Val::bfloat16:
      return {type, u.bf16[i]};
    case Dtype::Val::float32:
      return {type, r == ReduceOp::sum ? l.op_sum : u.f32[i - 1]};
    case Dtype::Val::float64:
      return {type, r == ReduceOp::sum ? l.op_sum : u.f64[i - 1]};
    case Dtype::Val::complex64:
      return {type, r == ReduceOp::sum ? l.op_sum : u.c64[i - 1]};
    default:
      return {type, r == ReduceOp::sum   ? l.op_sum
                    : r == ReduceOp::max ? l.op_max
                                         : l.op_min};
  }
}

}  // namespace

bool mpi_available() { return lib().handle != nullptr; }

void mpi_abort(int code) {
  auto& l = lib();
  int initialized = 0, finalized = 0;
  if (!l.handle) {
    return;
  }
  l.MPI_Initialized(&initialized);
  l.MPI_Finalized(&finalized);
  if (initialized && !finalized) {
    l.MPI_Abort(l.comm_world, code);
  }
}

bool mpi_launched() {
  // Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE; PMIx launchers PMIX_RANK.
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK");
}

std::shared_ptr<Comm> mpi_world() {
  static std::once_flag once;
  static std::shared_ptr<Comm> world;
  static std::string failure;
  std::call_once(once, [] {
    if (!mpi_launched()) {
      return;
    }
    auto& l = lib();
    if (!l.handle) {
      failure = "this process was started by an MPI launcher but " + l.error;
      return;
    }
    int initialized = 0;
    l.MPI_Initialized(&initialized);
    if (!initialized) {
      // Collectives run on a CPU stream's worker thread, and separate
      // streams may communicate at once: MPI_THREAD_MULTIPLE.
      int provided = 0;
      if (l.MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) !=
          MPI_SUCCESS) {
        failure = "MPI_Init_thread failed";
        return;
      }
      if (provided < MPI_THREAD_MULTIPLE) {
        failure = "this MPI does not support MPI_THREAD_MULTIPLE";
        return;
      }
      std::atexit(finalize_at_exit);
    }
    user_ops();
    world = std::make_shared<MpiComm>(l.comm_world);
  });
  if (!failure.empty()) {
    throw std::runtime_error("[distributed.init] " + failure + ".");
  }
  return world;
}

}  // namespace fluxion::distributed::detail
