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

}  // namespace tfmpi::wire
