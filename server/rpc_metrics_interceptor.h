// A gRPC server interceptor that counts every call by method and status
// code and times it (quant_rpc_requests_total, quant_rpc_duration_seconds),
// for every service quantd serves, without code in each handler.
#ifndef QUANT_SERVER_RPC_METRICS_INTERCEPTOR_H_
#define QUANT_SERVER_RPC_METRICS_INTERCEPTOR_H_

#include <memory>

#include "grpcpp/support/server_interceptor.h"
#include "metrics/quantd_metrics.h"

namespace quant::server {

class RpcMetricsInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `metrics` must outlive the server.
  explicit RpcMetricsInterceptorFactory(metrics::QuantdMetrics* metrics)
      : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  metrics::QuantdMetrics* metrics_;
};

}  // namespace quant::server

#endif  // QUANT_SERVER_RPC_METRICS_INTERCEPTOR_H_
