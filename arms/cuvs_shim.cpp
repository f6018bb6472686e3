// extern "C" entry points over cuvs::cluster::gmm::fit (cuVS 26.10), which has no
// Python or C binding. Host C++ only: it compiles with g++ against the headers of the
// libcuvs/libraft/librmm wheels (see arms/cuvs.py for the flags and include order).
//
// Why a session object: raft::resources owns the cuBLAS/cuSOLVER handles, which are
// expensive to create; keeping one across fits is how a cuVS user would call fit in
// a loop, so per-call handle set-up stays out of the timed region.
//
// Why one statistics adaptor per device, installed for the rest of the process: cuVS
// allocates through RMM's current device resource, which torch's allocator cannot see.
// Installing a statistics_resource_adaptor before any raft handle exists guarantees
// that every RMM allocation a handle ever makes (even lazily created workspaces) goes
// through it, and never restoring it means sessions created and destroyed in any order
// cannot unhook one another; push_counters()/pop_counters() give the peak of one fit.
#include <cuvs/cluster/gmm.hpp>
#include <raft/core/device_mdspan.hpp>
#include <raft/core/host_mdspan.hpp>
#include <raft/core/resource/cuda_stream.hpp>
#include <raft/core/resources.hpp>
#include <rmm/cuda_device.hpp>
#include <rmm/mr/cuda_memory_resource.hpp>
#include <rmm/mr/per_device_resource.hpp>
#include <rmm/mr/statistics_resource_adaptor.hpp>

#include <cuda/stream_ref>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <mutex>

namespace {

using any_device_resource = cuda::mr::any_resource<cuda::mr::device_accessible>;

// The current device's adaptor (copies share one state), installed on first use.
rmm::mr::statistics_resource_adaptor device_statistics()
{
  static std::mutex mtx;
  static std::map<int, rmm::mr::statistics_resource_adaptor> by_device;
  std::lock_guard<std::mutex> lock{mtx};
  int const device = rmm::get_current_cuda_device().value();
  auto it          = by_device.find(device);
  if (it == by_device.end()) {
    it = by_device.emplace(device, rmm::mr::statistics_resource_adaptor{rmm::mr::cuda_memory_resource{}}).first;
    rmm::mr::set_current_device_resource(any_device_resource{it->second});
  }
  return it->second;
}

struct Session {
  rmm::mr::statistics_resource_adaptor stats;
  std::unique_ptr<raft::resources> handle;
};

void set_error(char* err, std::size_t errlen, const char* what)
{
  if (err != nullptr && errlen > 0) std::snprintf(err, errlen, "%s", what);
}

}  // namespace

extern "C" {

// Creates a session; returns 0 and stores it in *out, or 1 with a message in err.
int turbo_cuvs_session_create(void** out, char* err, std::size_t errlen)
{
  try {
    auto s = std::make_unique<Session>(Session{device_statistics(), nullptr});
    s->handle = std::make_unique<raft::resources>();
    *out      = s.release();
    return 0;
  } catch (std::exception const& e) {
    set_error(err, errlen, e.what());
    return 1;
  }
}

// Destroys the session's raft handle (the device's statistics adaptor stays installed).
int turbo_cuvs_session_destroy(void* session, char* err, std::size_t errlen)
{
  try {
    delete static_cast<Session*>(session);
    return 0;
  } catch (std::exception const& e) {
    set_error(err, errlen, e.what());
    return 1;
  }
}

// One call of cuvs::cluster::gmm::fit (float, DIAG or FULL) on raw device pointers.
//   X (N, d) row-major; weights (K); means (K, d); covariances (K, d) = variances (DIAG) or
//   (K, d, d) row-major (full != 0: covariance_type::FULL), all in/out; precisions_chol,
//   precisions (the covariances' shape) and labels (N, int32) are outputs.
//   warm_start != 0: the incoming weights/means/covariances are the initialization (Table 1);
//   0: cuVS's own default initialization (params::init's default, n_init = 1; the end-to-end fit).
// Runs exactly max_iter EM iterations when tol <= 0 (cuVS stops on |lb - prev| < tol),
// then one more E-step for the labels. Writes the library's lower bound (mean
// log-likelihood of the last in-loop E-step), iteration count and converged flag, and
// the peak bytes RMM held during this fit. Returns 0, or 1 with std::exception::what().
int turbo_cuvs_gmm_fit(void* session,
                       void* stream,
                       const float* X,
                       float* weights,
                       float* means,
                       float* covariances,
                       float* precisions_chol,
                       float* precisions,
                       int* labels,
                       std::int64_t N,
                       std::int64_t d,
                       int K,
                       int full,
                       int max_iter,
                       double reg_covar,
                       double tol,
                       int warm_start,
                       float* lower_bound,
                       int* n_iter,
                       int* converged,
                       std::int64_t* rmm_peak_bytes,
                       char* err,
                       std::size_t errlen)
{
  auto* s = static_cast<Session*>(session);
  bool pushed = false;
  try {
    raft::resource::set_cuda_stream(*s->handle,
                                    cuda::stream_ref{static_cast<cudaStream_t>(stream)});
    cuvs::cluster::gmm::params p;
    p.n_components = K;
    p.cov_type     = full != 0 ? cuvs::cluster::gmm::covariance_type::FULL
                                : cuvs::cluster::gmm::covariance_type::DIAG;
    const std::int64_t cov_size = full != 0 ? K * d * d : K * d;
    p.tol          = tol;
    p.reg_covar    = reg_covar;
    p.max_iter     = max_iter;
    p.n_init       = 1;

    bool conv = false;
    s->stats.push_counters();
    pushed = true;
    cuvs::cluster::gmm::fit(
      *s->handle,
      p,
      raft::make_device_matrix_view<const float, std::int64_t>(X, N, d),
      raft::make_device_vector_view<float, std::int64_t>(weights, K),
      raft::make_device_matrix_view<float, std::int64_t>(means, K, d),
      raft::make_device_vector_view<float, std::int64_t>(covariances, cov_size),
      raft::make_device_vector_view<float, std::int64_t>(precisions_chol, cov_size),
      raft::make_device_vector_view<float, std::int64_t>(precisions, cov_size),
      raft::make_device_vector_view<int, std::int64_t>(labels, N),
      raft::make_host_scalar_view<float>(lower_bound),
      raft::make_host_scalar_view<int>(n_iter),
      raft::make_host_scalar_view<bool>(&conv),
      warm_start != 0);
    pushed          = false;
    *rmm_peak_bytes = s->stats.pop_counters().first.peak;
    *converged      = conv ? 1 : 0;
    return 0;
  } catch (std::exception const& e) {
    if (pushed) s->stats.pop_counters();
    set_error(err, errlen, e.what());
    return 1;
  }
}

}  // extern "C"
