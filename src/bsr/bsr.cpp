// Dispatch point of the block-sparse products: validates the arguments once (messages name the
// argument), reduces dsd to the dds form, then picks the CPU or CUDA backend.
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../common/check.h"
#include "bsr_internal.h"

namespace sparsekern::bsr {
namespace {

using sparsekern::detail::device_name;

/// Which index sets an op reads.
enum Sets : unsigned { kRowWise = 1, kColWise = 2, kCoords = 4, kNoValues = 8 };

void check_dense(const char* name, const MatrixView& v, std::int64_t rows, std::int64_t cols) {
  SK_EXPECTS(v.rows == rows && v.cols == cols, "`", name, "` must be ", rows, "x", cols,
             " to chain with the other operands; got ", v.rows, "x", v.cols);
  SK_EXPECTS(v.row_stride >= 0 && v.col_stride >= 0, "`", name,
             "` must have non-negative strides; got (", v.row_stride, ", ", v.col_stride, ")");
  SK_EXPECTS(::sparsekern::detail::checked_product({rows, cols}) >= 0 &&
                 ::sparsekern::detail::span_elements({{rows, v.row_stride}, {cols, v.col_stride}}, 8) >= 0, "`", name, "`: ",
             rows, "x", cols, " at strides (", v.row_stride, ", ", v.col_stride, ") overflows 64-bit offsets");
  SK_EXPECTS(v.data != nullptr || rows * cols == 0, "`", name, "` has a null data pointer but ",
             rows, "x", cols, " elements");
}

/// Elements a checked view spans.
std::int64_t span(const MatrixView& v) {
  return ::sparsekern::detail::span_elements({{v.rows, v.row_stride}, {v.cols, v.col_stride}}, 8);
}
std::int64_t span(const MutableMatrixView& v) {
  return ::sparsekern::detail::span_elements({{v.rows, v.row_stride}, {v.cols, v.col_stride}}, 8);
}

void check_out(const char* name, const MutableMatrixView& v, std::int64_t rows, std::int64_t cols) {
  check_dense(name, MatrixView{v.data, v.rows, v.cols, v.row_stride, v.col_stride, 0}, rows, cols);
  // Distinct elements must not overlap (a zero stride over a dim of size > 1 would race).
  SK_EXPECTS((rows <= 1 || v.row_stride > 0) && (cols <= 1 || v.col_stride > 0), "`", name,
             "` must not have zero strides (outputs cannot broadcast); got (", v.row_stride, ", ",
             v.col_stride, ")");
  SK_EXPECTS(::sparsekern::detail::self_disjoint({{rows, v.row_stride}, {cols, v.col_stride}}), "`", name,
             "` must not overlap itself: strides (", v.row_stride, ", ", v.col_stride, ") for ", rows, "x", cols);
}

/// Shape, block size and pointer checks of a block-sparse view, plus (host arrays only) the
/// contents of the index sets the op reads.
void check_sparse(const BlockSparseView& s, unsigned sets, bool host) {
  const std::int64_t b = s.block_size;
  SK_EXPECTS(b == 16 || b == 32 || b == 64 || b == 128,
             "`block_size` must be 16, 32, 64 or 128; got ", b);
  SK_EXPECTS(s.rows >= 0 && s.cols >= 0 && s.rows % b == 0 && s.cols % b == 0,
             "the block size ", b, " must divide the sparse matrix shape; got ", s.rows, "x", s.cols);
  const std::int64_t rb = s.rows / b, cb = s.cols / b;
  SK_EXPECTS(rb <= INT_MAX && cb <= INT_MAX, "the sparse matrix has too many block rows/columns (",
             rb, "x", cb, ") for int32 indices");
  SK_EXPECTS(s.nnz_blocks >= 0 && s.nnz_blocks <= rb * cb && s.nnz_blocks <= INT_MAX,
             "`nnz_blocks` must be in [0, ", rb * cb, "] for a ", rb, "x", cb,
             " block grid; got ", s.nnz_blocks);
  // sdd reads no values (kNoValues): bsr.h says its pattern's `values` is ignored.
  SK_EXPECTS(s.values != nullptr || s.nnz_blocks == 0 || (sets & kNoValues), "`values` is null but nnz_blocks = ",
             s.nnz_blocks);
  if (sets & kRowWise) {
    SK_EXPECTS(s.block_row_offsets != nullptr, "`block_row_offsets` is required");
    SK_EXPECTS(s.block_col_indices != nullptr || s.nnz_blocks == 0, "`block_col_indices` is required");
  }
  if (sets & kColWise) {
    SK_EXPECTS(s.block_col_offsets != nullptr, "`block_col_offsets` is required");
    SK_EXPECTS((s.block_rows_by_col != nullptr && s.blocks_by_col != nullptr) || s.nnz_blocks == 0,
               "`block_rows_by_col` and `blocks_by_col` are required");
  }
  if (sets & kCoords) {
    SK_EXPECTS((s.block_row_indices != nullptr && s.block_col_indices != nullptr) ||
                   s.nnz_blocks == 0,
               "`block_row_indices` and `block_col_indices` are required");
  }
  if (host) {
    BlockSparseView only = s;
    if (!(sets & kRowWise)) only.block_row_offsets = nullptr;
    if (!(sets & kColWise)) only.block_col_offsets = nullptr;
    if (!(sets & kCoords)) only.block_row_indices = nullptr;
    validate_pattern(only);
  }
}

void check_offsets(const char* name, const std::int32_t* offsets, std::int64_t n, std::int64_t nnz) {
  SK_EXPECTS(offsets[0] == 0, "`", name, "`[0] must be 0; got ", offsets[0]);
  for (std::int64_t i = 0; i < n; ++i)
    SK_EXPECTS(offsets[i + 1] >= offsets[i], "`", name, "` must be non-decreasing; entry ", i + 1,
               " is ", offsets[i + 1], " after ", offsets[i]);
  SK_EXPECTS(offsets[n] == nnz, "`", name, "`[", n, "] must equal nnz_blocks (", nnz, "); got ",
             offsets[n]);
}

}  // namespace

void validate_pattern(const BlockSparseView& s) {
  const std::int64_t b = s.block_size;
  SK_EXPECTS(b > 0, "`block_size` must be positive; got ", b);
  SK_EXPECTS(s.rows >= 0 && s.cols >= 0 && s.nnz_blocks >= 0,
             "the sparse matrix sizes must be non-negative; got ", s.rows, "x", s.cols, ", nnz_blocks=", s.nnz_blocks);
  SK_EXPECTS(s.rows % b == 0 && s.cols % b == 0, "the block size ", b, " must divide the sparse matrix shape; got ",
             s.rows, "x", s.cols);
  const std::int64_t rb = s.rows / b, cb = s.cols / b, nnz = s.nnz_blocks;
  // Each set that is given needs its companions (the offsets index the arrays they come with;
  // without blocks those arrays are empty, and an empty array may have a null pointer).
  SK_EXPECTS(nnz == 0 || s.block_row_offsets == nullptr || s.block_col_indices != nullptr,
             "`block_row_offsets` needs `block_col_indices`");
  SK_EXPECTS(nnz == 0 || s.block_row_indices == nullptr || s.block_col_indices != nullptr,
             "`block_row_indices` needs `block_col_indices`");
  SK_EXPECTS(nnz == 0 || s.block_col_offsets == nullptr ||
                 (s.block_rows_by_col != nullptr && s.blocks_by_col != nullptr),
             "`block_col_offsets` needs `block_rows_by_col` and `blocks_by_col`");
  if (s.block_row_offsets != nullptr) {
    check_offsets("block_row_offsets", s.block_row_offsets, rb, nnz);
    for (std::int64_t i = 0; i < rb; ++i) {
      for (std::int32_t e = s.block_row_offsets[i]; e < s.block_row_offsets[i + 1]; ++e) {
        const std::int32_t c = s.block_col_indices[e];
        SK_EXPECTS(c >= 0 && c < cb, "`block_col_indices` out of range: entry ", e, " is ", c,
                   " (", cb, " block columns)");
        SK_EXPECTS(e == s.block_row_offsets[i] || s.block_col_indices[e - 1] < c,
                   "`block_col_indices` must be strictly increasing within each block row; block row ",
                   i, " has ", c, " after ", s.block_col_indices[e - 1]);
      }
    }
  }
  if (s.block_row_indices != nullptr) {
    for (std::int64_t p = 0; p < nnz; ++p) {
      const std::int32_t r = s.block_row_indices[p], c = s.block_col_indices[p];
      SK_EXPECTS(r >= 0 && r < rb, "`block_row_indices` out of range: entry ", p, " is ", r, " (",
                 rb, " block rows)");
      SK_EXPECTS(c >= 0 && c < cb, "`block_col_indices` out of range: entry ", p, " is ", c, " (",
                 cb, " block columns)");
      if (s.block_row_offsets != nullptr)
        SK_EXPECTS(p >= s.block_row_offsets[r] && p < s.block_row_offsets[r + 1],
                   "`block_row_indices` disagrees with `block_row_offsets` at entry ", p);
    }
  }
  if (s.block_col_offsets != nullptr) {
    check_offsets("block_col_offsets", s.block_col_offsets, cb, nnz);
    std::vector<char> seen(static_cast<std::size_t>(nnz), 0);
    for (std::int64_t j = 0; j < cb; ++j) {
      for (std::int32_t e = s.block_col_offsets[j]; e < s.block_col_offsets[j + 1]; ++e) {
        const std::int32_t r = s.block_rows_by_col[e], v = s.blocks_by_col[e];
        SK_EXPECTS(r >= 0 && r < rb, "`block_rows_by_col` out of range: entry ", e, " is ", r,
                   " (", rb, " block rows)");
        SK_EXPECTS(e == s.block_col_offsets[j] || s.block_rows_by_col[e - 1] < r,
                   "`block_rows_by_col` must be strictly increasing within each block column; "
                   "block column ", j, " has ", r, " after ", s.block_rows_by_col[e - 1]);
        SK_EXPECTS(v >= 0 && v < nnz && !seen[v], "`blocks_by_col` must be a permutation of [0, ",
                   nnz, "); entry ", e, " is ", v);
        seen[v] = 1;
        if (s.block_col_indices != nullptr)
          SK_EXPECTS(s.block_col_indices[v] == j, "`blocks_by_col` entry ", e,
                     " points at a block of block column ", s.block_col_indices[v], ", not ", j);
        if (s.block_row_offsets != nullptr)
          SK_EXPECTS(v >= s.block_row_offsets[r] && v < s.block_row_offsets[r + 1],
                     "`blocks_by_col` entry ", e, " points at a block outside block row ", r);
      }
    }
  }
}

namespace {

/// The sparse operand of a dds problem, read column by column: column j of S comes from the
/// column-wise index set; column j of Sᵀ is row j of S (row-wise set, blocks used transposed).
detail::SparseOperand dds_sparse(const BlockSparseView& s, bool columns_of_transpose, std::int64_t k,
                             std::int64_t n) {
  detail::SparseOperand d;
  d.block = s.block_size;
  d.k_blocks = k / s.block_size;
  d.n_blocks = n / s.block_size;
  d.nnz_blocks = s.nnz_blocks;
  d.values = s.values;
  if (columns_of_transpose) {
    d.offsets = s.block_row_offsets;
    d.indices = s.block_col_indices;
    d.value_index = nullptr;
    d.transposed_blocks = true;
  } else {
    d.offsets = s.block_col_offsets;
    d.indices = s.block_rows_by_col;
    d.value_index = s.blocks_by_col;
    d.transposed_blocks = false;
  }
  return d;
}

/// Runs a filled dds problem on its device.
void run_dds(const detail::DdsProblem& q, Stream stream, const char* op) {
  if (q.device.type == DeviceType::cpu) {
    detail::dds_cpu(q);
    return;
  }
#if SPARSEKERN_WITH_CUDA
  detail::dds_cuda(q, stream);
#else
  (void)stream;
  throw BackendUnavailable(std::string(op) + ": operands are on " + device_name(q.device) +
                           " but sparsekern was built without CUDA (CPU-only build)");
#endif
}

}  // namespace

void dds(const DdsParams& p, Stream stream) {
  const BlockSparseView& s = p.s;
  const bool host = p.device.type == DeviceType::cpu;
  check_sparse(s, p.transpose_s ? kRowWise : kColWise, host);
  const std::int64_t k = p.transpose_s ? s.cols : s.rows;
  const std::int64_t n = p.transpose_s ? s.rows : s.cols;
  const std::int64_t m = p.a.rows;
  SK_EXPECTS(m >= 0, "`a` must have a non-negative row count; got ", m);
  SK_EXPECTS(p.a.cols == k, "`a` must have ", k, " columns (the rows of ",
             p.transpose_s ? "Sᵀ" : "S", "); got ", p.a.cols);
  check_dense("a", p.a, m, k);
  check_out("out", p.c, m, n);
  const std::int64_t elem = static_cast<std::int64_t>(dtype_size(p.dtype));
  SK_EXPECTS(!::sparsekern::detail::ranges_overlap(p.c.data, span(p.c), p.a.data, span(p.a), elem) &&
                 (p.c.data != p.a.data || m * n == 0),
             "`out` must not share memory with `a`");
  SK_EXPECTS(!::sparsekern::detail::ranges_overlap(p.c.data, span(p.c), p.bias, n, elem),
             "`bias` must not share memory with `out`");

  detail::DdsProblem q;
  q.dtype = p.dtype;
  q.device = p.device;
  q.fp32_math = p.fp32_math;
  q.a = p.a;
  q.c = p.c;
  q.bias = p.bias;
  q.s = dds_sparse(s, p.transpose_s, k, n);
  if (p.workspace.data != nullptr) {
    SK_EXPECTS(p.workspace.bytes >= kDdsWorkspaceBytes, "`workspace` must hold at least ", kDdsWorkspaceBytes,
               " bytes; got ", p.workspace.bytes);
    SK_EXPECTS(reinterpret_cast<std::uintptr_t>(p.workspace.data) % 4 == 0, "`workspace` must be 4-byte aligned");
    q.tile_counter = static_cast<int*>(p.workspace.data);
    const bool aligned = reinterpret_cast<std::uintptr_t>(p.workspace.data) % 256 == 0;
    const std::size_t dense = detail::dds_dense_bytes(p);
    if (dense != 0 && p.workspace.bytes >= dense && aligned) {
      q.dense_scratch = static_cast<char*>(p.workspace.data) + detail::kDdsScratchOffset;
      q.dense_scratch_bytes = p.workspace.bytes - detail::kDdsScratchOffset;
    } else {  // no dense path (or no room for it): the transposed tf32 blocks where they pay
      const std::size_t full = detail::dds_copy_bytes(p);
      if (full > kDdsWorkspaceBytes && p.workspace.bytes >= full &&
          reinterpret_cast<std::uintptr_t>(p.workspace.data) % 16 == 0) {
        q.block_scratch = static_cast<char*>(p.workspace.data) + detail::kDdsScratchOffset;
      }
    }
  }
  run_dds(q, stream, "bsr.dds");
}

#if !SPARSEKERN_WITH_CUDA
namespace detail {
bool tf32_wgmma(int, std::int64_t) { return false; }
std::size_t sdd_dense_bytes(const SddParams&) { return 0; }
std::size_t sdd_split_bytes(const SddParams&) { return 0; }
int sdd_row_sum_splits(const SddParams&) { return 1; }
bool sdd_sm80_ungrouped(const SddParams&) { return false; }
std::size_t dds_dense_bytes(const DdsParams&) { return 0; }
}  // namespace detail
#endif

bool tf32_wgmma(Device device, std::int64_t block_size) {
  return device.type == DeviceType::cuda && detail::tf32_wgmma(device.index, block_size);
}

std::size_t dds_workspace_bytes(const DdsParams& p) {
  const std::size_t dense = detail::dds_dense_bytes(p);
  return dense != 0 ? dense : detail::dds_copy_bytes(p);
}

std::size_t dds_dense_workspace_bytes(const DdsParams& p) { return detail::dds_dense_bytes(p); }

std::size_t detail::dds_copy_bytes(const DdsParams& p) {
  const std::int64_t b = p.s.block_size, nnz = p.s.nnz_blocks;
  // Bop = S: its block columns are S's. With fewer than ~1.5 blocks per column the product is
  // bound by writing C, and the sm_90a tf32 kernel's epilogue lost to the SM80 kernel's (H100,
  // 8192 × 3072 ← 768 input gradient: 104 vs 90-96 µs at 0.6 and 1.2 blocks per column; won at
  // 1.5: 110 vs 143, 2.4: 39 vs 63, 3.2: 156 vs 313; session 13): no copy there.
  const std::int64_t n_cols = b > 0 ? p.s.cols / b : 0;
  if (p.device.type == DeviceType::cuda && p.dtype == DType::f32 && p.fp32_math == dense::Fp32Math::tf32 &&
      !p.transpose_s && nnz > 0 && double(nnz) >= 1.5 * double(n_cols) && detail::tf32_wgmma(p.device.index, b)) {
    return detail::kDdsScratchOffset + std::size_t(nnz) * std::size_t(b * b) * sizeof(float);
  }
  return kDdsWorkspaceBytes;
}

int detail::auto_off_on(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0' || std::strcmp(v, "auto") == 0) return -1;
  if (std::strcmp(v, "0") == 0) return 0;
  if (std::strcmp(v, "1") == 0) return 1;
  throw InvalidArgument(std::string(name) + " must be auto, 0 or 1; got '" + v + "'");
}

std::size_t detail::sdd_copy_bytes(const SddParams& p) {
  const std::int64_t m = p.a.rows, k = p.a.cols, n = p.b.cols, b = p.pattern.block_size;
  if (p.device.type != DeviceType::cuda || p.dtype != DType::f32 || p.fp32_math != dense::Fp32Math::tf32 ||
      m <= 0 || k <= 0 || n <= 0 || !detail::tf32_wgmma(p.device.index, b)) {
    return 0;
  }
  // The copies move k · (m + n) elements twice; the wgmma kernel saves time in proportion to the
  // k · nnz · b² multiply-adds. Measured (H100, k = 8192, m = n = 4096, tools/diag/bsr_sdd_dense.py,
  // session 20, after the SM80 kernel's fragment loads became conflict-free): the whole sdd, SM80
  // kernel vs copies + wgmma, µs at d = 0.1 / 0.25 / 0.5 / 0.75: b = 128 299 / 586 / 1161 / 1756 vs
  // 347 / 450 / 714 / 978 (even near d = 0.19, nnz · b² / (m + n) ≈ 390), b = 64 300 / 586 / 1162 /
  // 1753 vs 414 / 707 / 1249 / 1797 (the copies never pay before the dense path takes over, at
  // d = 0.45 then, 0.33 since session 22). So copy only for b = 128, from nnz · b² / (m + n) = 400
  // (session 13, before the SM80 kernel's gain: 300 for b = 128 and 700 for b = 64).
  // SPARSEKERN_BSR_SDD_WGMMA=auto | 0 | 1 (read once per process): 0 never copies (the SM80
  // kernel reads the operands as they are), 1 copies wherever the wgmma kernel applies.
  static const int mode = detail::auto_off_on("SPARSEKERN_BSR_SDD_WGMMA");
  if (mode == 0) return 0;
  const double per_line = double(p.pattern.nnz_blocks) * double(b * b) / double(m + n);
  if (mode < 0 && (b != 128 || per_line < 400.0)) return 0;
  return detail::sdd_copies(m, k, n).bytes;
}

std::size_t sdd_dense_workspace_bytes(const SddParams& p) { return detail::sdd_dense_bytes(p); }

std::size_t sdd_split_workspace_bytes(const SddParams& p) {
  return detail::sdd_dense_bytes(p) != 0 ? 0 : detail::sdd_split_bytes(p);
}

bool sdd_row_sums_fused(const SddParams& p) {
  return p.device.type == DeviceType::cuda && detail::sdd_sm80_ungrouped(p);
}

std::size_t sdd_row_sums_workspace_bytes(const SddParams& p) {
  if (p.device.type != DeviceType::cuda) return 0;
  return detail::row_sums_layout(p.a.rows, p.a.cols, detail::sdd_row_sum_splits(p)).bytes;
}

std::size_t sdd_workspace_bytes(const SddParams& p) {
  const std::size_t dense = detail::sdd_dense_bytes(p);
  if (dense != 0) return dense;
  return std::max(detail::sdd_copy_bytes(p), detail::sdd_split_bytes(p));  // tf32 / 16-bit: never both
}

void dsd(const DsdParams& p, Stream stream) {
  const BlockSparseView& s = p.s;
  const bool host = p.device.type == DeviceType::cpu;
  check_sparse(s, p.transpose_s ? kColWise : kRowWise, host);
  const std::int64_t m = p.transpose_s ? s.cols : s.rows;
  const std::int64_t k = p.transpose_s ? s.rows : s.cols;
  const std::int64_t n = p.b.cols;
  SK_EXPECTS(n >= 0, "`b` must have a non-negative column count; got ", n);
  SK_EXPECTS(p.b.rows == k, "`b` must have ", k, " rows (the columns of ",
             p.transpose_s ? "Sᵀ" : "S", "); got ", p.b.rows);
  check_dense("b", p.b, k, n);
  check_out("out", p.c, m, n);
  SK_EXPECTS(!::sparsekern::detail::ranges_overlap(p.c.data, span(p.c), p.b.data, span(p.b),
                                     static_cast<std::int64_t>(dtype_size(p.dtype))) &&
                 (p.c.data != p.b.data || m * n == 0),
             "`out` must not share memory with `b`");

  // Cᵀ (n × m) = Bᵀ (n × k) · op(S)ᵀ: transposes are stride swaps.
  detail::DdsProblem q;
  q.dtype = p.dtype;
  q.device = p.device;
  q.fp32_math = p.fp32_math;
  q.a = MatrixView{p.b.data, n, k, p.b.col_stride, p.b.row_stride, 0};
  q.c = MutableMatrixView{p.c.data, n, m, p.c.col_stride, p.c.row_stride, 0};
  q.s = dds_sparse(s, !p.transpose_s, k, m);  // op(S)ᵀ: S when transposed, else Sᵀ
  run_dds(q, stream, "bsr.dsd");
}

void sdd(const SddParams& p, Stream stream) {
  const BlockSparseView& s = p.pattern;
  const bool host = p.device.type == DeviceType::cpu;
  check_sparse(s, (p.a_row_sums != nullptr ? kCoords | kRowWise : kCoords) | kNoValues, host);
  const std::int64_t m = s.rows, n = s.cols, k = p.a.cols;
  SK_EXPECTS(k >= 0, "`a` must have a non-negative column count; got ", k);
  SK_EXPECTS(p.a.rows == m, "`a` must have ", m, " rows (the rows of the pattern); got ", p.a.rows);
  SK_EXPECTS(p.b.cols == n, "`b` must have ", n, " columns (the columns of the pattern); got ",
             p.b.cols);
  check_dense("a", p.a, m, k);
  check_dense("b", p.b, k, n);
  SK_EXPECTS(p.out_values != nullptr || s.nnz_blocks == 0, "`out` (the output values) is null");
  SK_EXPECTS(s.nnz_blocks == 0 || (p.out_values != p.a.data && p.out_values != p.b.data),
             "`out` must not alias `a` or `b`");
  SK_EXPECTS(p.workspace.data == nullptr || reinterpret_cast<std::uintptr_t>(p.workspace.data) % 16 == 0,
             "`workspace` must be 16-byte aligned");
  if (p.a_row_sums != nullptr) {
    SK_EXPECTS(p.a_row_sums != p.a.data && p.a_row_sums != p.b.data && p.a_row_sums != p.out_values,
               "`a_row_sums` must not alias `a`, `b` or `out`");
    if (!host) {
      const std::size_t need = sdd_row_sums_workspace_bytes(p);
      SK_EXPECTS(p.row_sums_workspace.bytes >= need && (need == 0 || p.row_sums_workspace.data != nullptr),
                 "`row_sums_workspace` must hold sdd_row_sums_workspace_bytes(p) = ", need, " bytes; got ",
                 p.row_sums_workspace.bytes);
      SK_EXPECTS(reinterpret_cast<std::uintptr_t>(p.row_sums_workspace.data) % 16 == 0,
                 "`row_sums_workspace` must be 16-byte aligned");
    }
  }
  if (host) {
    detail::sdd_cpu(p);
    return;
  }
#if SPARSEKERN_WITH_CUDA
  SK_EXPECTS(k <= INT_MAX, "bsr.sdd: the inner dimension must fit in 32 bits on CUDA; got ", k);
  detail::sdd_cuda(p, stream);
#else
  (void)stream;
  throw BackendUnavailable("bsr.sdd: operands are on " + device_name(p.device) +
                           " but sparsekern was built without CUDA (CPU-only build)");
#endif
}

}  // namespace sparsekern::bsr
