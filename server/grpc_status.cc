// absl::Status -> grpc::Status with the same code and message.
#include "server/grpc_status.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace quant::server {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  absl::string_view message = status.message();
  std::string text(message.substr(0, kMaxStatusMessageBytes));
  if (message.size() > kMaxStatusMessageBytes) {
    // Whole UTF-8 characters only: drop a cut continuation sequence.
    while (!text.empty() &&
           (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) {
      text.pop_back();
    }
    if (!text.empty() && static_cast<unsigned char>(text.back()) >= 0xC0) {
      text.pop_back();
    }
    absl::StrAppend(&text, "... (", message.size(), " bytes, cut)");
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), text);
}

}  // namespace quant::server
