// Handle manager of a CPU-only build: there are no handles; the lifetime calls are no-ops, and
// asking for a CUDA handle is a clear error.
#include <sparsekern/error.h>
#include <sparsekern/handles.h>

namespace sparsekern::handles {

void init_cublas(Device) {
  throw BackendUnavailable("init_cublas: sparsekern was built without CUDA (CPU-only build)");
}
void destroy_all() {}
int live_handle_count() { return 0; }

}  // namespace sparsekern::handles
