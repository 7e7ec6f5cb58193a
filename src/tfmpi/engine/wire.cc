#include "tfmpi/engine/wire.h"

#include <cstdint>
#include <cstring>

namespace tfmpi::wire {
namespace {

class Writer {
 public:
  template <typename T>
  void Pod(T v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void Str(const std::string& s) {
    Pod<std::uint64_t>(s.size());
    out_ += s;
  }
  void Ints(const std::vector<std::int64_t>& v) {
    Pod<std::uint64_t>(v.size());
    for (std::int64_t x : v) Pod(x);
  }
  void Meta(const TensorMeta& m) {
    Str(m.name);
    Pod(static_cast<std::uint8_t>(m.kind));
    Pod(static_cast<std::uint8_t>(m.dtype));
    Pod(static_cast<std::uint8_t>(m.op));
    Pod<std::int32_t>(m.root);
    Ints(m.shape);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  template <typename T>
  bool Pod(T* v) {
    if (in_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool Str(std::string* s) {
    std::uint64_t n;
    if (!Pod(&n) || in_.size() - pos_ < n) return false;
    s->assign(in_, pos_, n);
    pos_ += n;
    return true;
  }
  bool Ints(std::vector<std::int64_t>* v) {
    std::uint64_t n;
    if (!Pod(&n) || (in_.size() - pos_) / sizeof(std::int64_t) < n) return false;
    v->resize(n);
    for (auto& x : *v)
      if (!Pod(&x)) return false;
    return true;
  }
  bool Meta(TensorMeta* m) {
    std::uint8_t kind, dtype, op;
    std::int32_t root;
    if (!Str(&m->name) || !Pod(&kind) || !Pod(&dtype) || !Pod(&op) || !Pod(&root) ||
        !Ints(&m->shape))
      return false;
    // Out-of-range enums would reach DataTypeSize() (0) and divide by it.
    if (kind > static_cast<std::uint8_t>(CollectiveKind::kReduce) ||
        dtype > static_cast<std::uint8_t>(DataType::kBool) ||
        op > static_cast<std::uint8_t>(ReduceOp::kProduct))
      return false;
    m->kind = static_cast<CollectiveKind>(kind);
    m->dtype = static_cast<DataType>(dtype);
    m->op = static_cast<ReduceOp>(op);
    m->root = root;
    return true;
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  const std::string& in_;
  std::size_t pos_ = 0;
};

Status Corrupt(const char* what) {
  return Status::Internal(std::string("corrupt negotiation message (") + what + ")");
}

void WriteMetas(Writer& w, const std::vector<TensorMeta>& metas) {
  w.Pod<std::uint64_t>(metas.size());
  for (const auto& m : metas) w.Meta(m);
}

Status ReadMetas(Reader& r, std::vector<TensorMeta>* out) {
  std::uint64_t n;
  if (!r.Pod(&n)) return Corrupt("metas");
  out->clear();
  for (std::uint64_t i = 0; i < n; ++i) {
    TensorMeta m;
    if (!r.Meta(&m)) return Corrupt("meta");
    out->push_back(std::move(m));
  }
  return Status::Ok();
}

void WriteResponses(Writer& w, const std::vector<Response>& responses) {
  w.Pod<std::uint64_t>(responses.size());
  for (const auto& resp : responses) {
    w.Meta(resp.meta);
    w.Ints(resp.first_dims);
    w.Str(resp.error);
  }
}

Status ReadResponses(Reader& r, std::vector<Response>* out) {
  std::uint64_t n;
  if (!r.Pod(&n)) return Corrupt("responses");
  out->clear();
  for (std::uint64_t i = 0; i < n; ++i) {
    Response resp;
    if (!r.Meta(&resp.meta) || !r.Ints(&resp.first_dims) || !r.Str(&resp.error))
      return Corrupt("response");
    out->push_back(std::move(resp));
  }
  return Status::Ok();
}

Status Done(const Reader& r) { return r.done() ? Status::Ok() : Corrupt("trailing bytes"); }

}  // namespace

std::string EncodeMetas(const std::vector<TensorMeta>& metas) {
  Writer w;
  WriteMetas(w, metas);
  return w.Take();
}

Status DecodeMetas(const std::string& bytes, std::vector<TensorMeta>* out) {
  Reader r(bytes);
  TFMPI_RETURN_IF_ERROR(ReadMetas(r, out));
  return Done(r);
}

std::string EncodeResponses(const std::vector<Response>& responses) {
  Writer w;
  WriteResponses(w, responses);
  return w.Take();
}

Status DecodeResponses(const std::string& bytes, std::vector<Response>* out) {
  Reader r(bytes);
  TFMPI_RETURN_IF_ERROR(ReadResponses(r, out));
  return Done(r);
}

std::string EncodeReport(const RankReport& report) {
  Writer w;
  WriteMetas(w, report.metas);
  w.Pod<std::uint8_t>(report.leaving ? 1 : 0);
  w.Str(report.exit_reason);
  return w.Take();
}

Status DecodeReport(const std::string& bytes, RankReport* out) {
  Reader r(bytes);
  TFMPI_RETURN_IF_ERROR(ReadMetas(r, &out->metas));
  std::uint8_t leaving;
  if (!r.Pod(&leaving) || leaving > 1 || !r.Str(&out->exit_reason)) return Corrupt("report");
  out->leaving = leaving == 1;
  return Done(r);
}

std::string EncodeDecisions(const Decisions& decisions) {
  Writer w;
  WriteResponses(w, decisions.responses);
  w.Pod<std::uint64_t>(decisions.leaving.size());
  for (const LeaveNotice& n : decisions.leaving) {
    w.Pod<std::int32_t>(n.rank);
    w.Str(n.exit_reason);
  }
  return w.Take();
}

Status DecodeDecisions(const std::string& bytes, Decisions* out) {
  Reader r(bytes);
  TFMPI_RETURN_IF_ERROR(ReadResponses(r, &out->responses));
  std::uint64_t n;
  if (!r.Pod(&n)) return Corrupt("leave notices");
  out->leaving.clear();
  for (std::uint64_t i = 0; i < n; ++i) {
    LeaveNotice notice;
    std::int32_t rank;
    if (!r.Pod(&rank) || rank < 0 || !r.Str(&notice.exit_reason)) return Corrupt("leave notice");
    notice.rank = rank;
    out->leaving.push_back(std::move(notice));
  }
  return Done(r);
}

}  // namespace tfmpi::wire
