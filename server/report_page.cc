// ServeJobReportPage; see report_page.h.
#include "server/report_page.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/job_report.h"

namespace quant::server {
namespace {

metrics::HttpResponse Text(int status, std::string body) {
  metrics::HttpResponse response;
  response.status = status;
  response.body = absl::StrCat(body, "\n");
  return response;
}

}  // namespace

metrics::HttpResponse ServeJobReportPage(const metrics::HttpRequest& request,
                                         store::JobStore& store,
                                         ArtifactStore& artifacts,
                                         const Authenticator& auth) {
  const std::string* header =
      request.authorization.empty() ? nullptr : &request.authorization;
  if (absl::Status allowed = auth.CheckHeader(header, CallerRole::kClient);
      !allowed.ok()) {
    return Text(
        allowed.code() == absl::StatusCode::kPermissionDenied ? 403 : 401,
        std::string(allowed.message()));
  }
  // "/jobs/ID/report", nothing else.
  const std::vector<std::string> parts =
      absl::StrSplit(request.path, '/', absl::SkipEmpty());
  if (parts.size() != 3 || absl::StrCat("/", parts[0]) != kJobPagesPrefix ||
      parts[2] != "report") {
    return Text(404, absl::StrCat("not found: ", request.path,
                                  " (pages here: /jobs/ID/report)"));
  }
  const std::string& id = parts[1];
  absl::StatusOr<store::Job> job = store.GetJob(id);
  if (!job.ok()) {
    return Text(job.status().code() == absl::StatusCode::kNotFound ? 404 : 500,
                std::string(job.status().message()));
  }
  if (job->state != store::JobState::kSucceeded) {
    return Text(
        409, absl::StrCat("job ", id, " is ", store::JobStateName(job->state),
                          "; its report page exists once it has "
                          "succeeded"));
  }
  absl::StatusOr<PublishedAudit> audit = ReadPublishedAudit(artifacts, id);
  if (!audit.ok()) return Text(500, std::string(audit.status().message()));
  absl::StatusOr<std::string> html = RenderJobReportHtml(artifacts, id, *audit);
  if (!html.ok()) return Text(500, std::string(html.status().message()));
  metrics::HttpResponse response;
  response.content_type = "text/html; charset=utf-8";
  response.body = *std::move(html);
  return response;
}

}  // namespace quant::server
