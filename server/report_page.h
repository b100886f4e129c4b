// quantd's report pages on its metrics port: GET /jobs/ID/report answers a
// succeeded job's report.html (the page its checkpoint carries), read-only.
// When quantd has a client token the request must carry it ("Authorization:
// Bearer <token>"), as the API's calls must.
#ifndef QUANT_SERVER_REPORT_PAGE_H_
#define QUANT_SERVER_REPORT_PAGE_H_

#include "metrics/metrics_endpoint.h"
#include "server/artifact_store.h"
#include "server/auth.h"
#include "server/store/job_store.h"

namespace quant::server {

// The prefix the page is routed under.
inline constexpr char kJobPagesPrefix[] = "/jobs";

// 200 text/html for a succeeded job; 401/403 without the client token when
// one is set; 404 for another path or an unknown job; 409 for a job that has
// not succeeded; 500 when its published files cannot be rendered. Every
// answer that is not the page says why in plain text.
metrics::HttpResponse ServeJobReportPage(const metrics::HttpRequest& request,
                                         store::JobStore& store,
                                         ArtifactStore& artifacts,
                                         const Authenticator& auth);

}  // namespace quant::server

#endif  // QUANT_SERVER_REPORT_PAGE_H_
