// RAII, move-only owners of MPI handles, and the compile-time mapping from C++
// element types to MPI datatypes.
#pragma once

#include <mpi.h>

#include <complex>
#include <cstdint>
#include <utility>

namespace tfmpi::mpi {

// Frees an MPI handle with `Free` unless it is the null handle or MPI is
// already finalized (a handle outliving MPI_Finalize is not freed twice).
template <typename Handle, Handle (*Null)(), int (*Free)(Handle*)>
class UniqueHandle {
 public:
  UniqueHandle() : h_(Null()) {}
  explicit UniqueHandle(Handle h) : h_(h) {}
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  UniqueHandle(UniqueHandle&& o) noexcept : h_(std::exchange(o.h_, Null())) {}
  UniqueHandle& operator=(UniqueHandle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, Null());
    }
    return *this;
  }
  ~UniqueHandle() { reset(); }

  Handle get() const { return h_; }
  Handle* ptr() { return &h_; }  // for MPI calls that update the handle in place
  Handle* out() { reset(); return &h_; }  // for MPI calls that create the handle
  void reset() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (h_ != Null() && !finalized) Free(&h_);
    h_ = Null();
  }
  // Gives the handle up without freeing it (for handles whose free may block).
  Handle release() { return std::exchange(h_, Null()); }

 private:
  Handle h_;
};

inline MPI_Comm NullComm() { return MPI_COMM_NULL; }
inline MPI_Datatype NullType() { return MPI_DATATYPE_NULL; }
inline MPI_Op NullOp() { return MPI_OP_NULL; }
inline int FreeComm(MPI_Comm* c) { return MPI_Comm_free(c); }
inline int FreeType(MPI_Datatype* t) { return MPI_Type_free(t); }
inline int FreeOp(MPI_Op* o) { return MPI_Op_free(o); }

using Comm = UniqueHandle<MPI_Comm, NullComm, FreeComm>;
using Datatype = UniqueHandle<MPI_Datatype, NullType, FreeType>;
using Op = UniqueHandle<MPI_Op, NullOp, FreeOp>;

// Compile-time C++ type -> MPI datatype. An unmapped type fails to compile.
template <typename T> struct TypeMap;
template <> struct TypeMap<char> { static MPI_Datatype get() { return MPI_CHAR; } };
template <> struct TypeMap<float> { static MPI_Datatype get() { return MPI_FLOAT; } };
template <> struct TypeMap<double> { static MPI_Datatype get() { return MPI_DOUBLE; } };
template <> struct TypeMap<std::int32_t> { static MPI_Datatype get() { return MPI_INT32_T; } };
template <> struct TypeMap<std::int64_t> { static MPI_Datatype get() { return MPI_INT64_T; } };
template <> struct TypeMap<std::uint8_t> { static MPI_Datatype get() { return MPI_UINT8_T; } };
template <> struct TypeMap<std::uint64_t> { static MPI_Datatype get() { return MPI_UINT64_T; } };

template <typename T>
MPI_Datatype TypeOf() { return TypeMap<T>::get(); }

}  // namespace tfmpi::mpi
