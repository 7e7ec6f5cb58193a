// Byte encoding of the negotiation messages (request metas from every rank,
// responses from the coordinator). Both ends run the same build, so the
// format is private and unversioned; decoding still validates lengths.
#pragma once

#include <string>
#include <vector>

#include "tfmpi/common/status.h"
#include "tfmpi/engine/request.h"

namespace tfmpi::wire {

std::string EncodeMetas(const std::vector<TensorMeta>& metas);
Status DecodeMetas(const std::string& bytes, std::vector<TensorMeta>* out);

std::string EncodeResponses(const std::vector<Response>& responses);
Status DecodeResponses(const std::string& bytes, std::vector<Response>* out);

// A rank's message to rank 0 in a full round (Note [Negotiation protocol]).
struct RankReport {
  std::vector<TensorMeta> metas;  // requests not reported before
  bool leaving = false;           // this rank shuts down (said once)
  std::string exit_reason;        // the error it stops on, if any (Engine::SetExitReason)
};
// A rank that said it is leaving, as rank 0 passes it on.
struct LeaveNotice {
  int rank = 0;
  std::string exit_reason;
};
// Rank 0's reply to a full round.
struct Decisions {
  std::vector<Response> responses;
  std::vector<LeaveNotice> leaving;
};

std::string EncodeReport(const RankReport& report);
Status DecodeReport(const std::string& bytes, RankReport* out);

std::string EncodeDecisions(const Decisions& decisions);
Status DecodeDecisions(const std::string& bytes, Decisions* out);

}  // namespace tfmpi::wire
