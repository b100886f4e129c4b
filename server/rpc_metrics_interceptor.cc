// RpcMetricsInterceptor: one per call; records when the status is sent.
#include "server/rpc_metrics_interceptor.h"

#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"

namespace quant::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

class RpcMetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  RpcMetricsInterceptor(metrics::QuantdMetrics* metrics, std::string method)
      : metrics_(metrics), method_(std::move(method)), start_(absl::Now()) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      metrics_->OnRpcFinished(
          method_, static_cast<absl::StatusCode>(status.error_code()),
          absl::Now() - start_);
    }
    methods->Proceed();
  }

 private:
  metrics::QuantdMetrics* metrics_;
  std::string method_;
  absl::Time start_;
};

}  // namespace

grpc::experimental::Interceptor*
RpcMetricsInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  // "/quant.v1.QuantService/CreateJob" -> "quant.v1.QuantService/CreateJob".
  std::string method = info->method() != nullptr ? info->method() : "unknown";
  if (!method.empty() && method.front() == '/') method.erase(0, 1);
  return new RpcMetricsInterceptor(metrics_, std::move(method));
}

}  // namespace quant::server
