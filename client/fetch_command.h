// `quantctl fetch JOB DIR`: copies a SUCCEEDED job's packed checkpoint to
// DIR. The API has no download call: this works where the artifact's
// file:// URI is readable from this machine (same host or a shared file
// system) and says so clearly otherwise.
#ifndef QUANT_CLIENT_FETCH_COMMAND_H_
#define QUANT_CLIENT_FETCH_COMMAND_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "client/command.h"

namespace quant {

Command FetchCommand();

// The local path of a "file:///ABS/PATH" URI; InvalidArgument naming the
// URI for any other form.
absl::StatusOr<std::string> LocalPathOfFileUri(const std::string& uri);

// Copies the directory `from` to `to` (which must not exist) through a
// temporary sibling renamed at the end, so `to` appears complete or not at
// all. `check`, when set, runs on the finished copy before the rename; its
// error removes the copy and is returned.
absl::Status CopyDirectory(
    const std::string& from, const std::string& to,
    const std::function<absl::Status(const std::string& copy)>& check =
        nullptr);

}  // namespace quant

#endif  // QUANT_CLIENT_FETCH_COMMAND_H_
