// Bindings of the block-sparse family (sparsekern/bsr.h). The sparse operand arrives as its values
// plus the index-set arrays (None for sets an op does not read), all checked here for dtype,
// device, rank and contiguity, so the library sees only well-formed views.
#include <nanobind/stl/string.h>
#include <sparsekern/bsr.h>

#include <string>

#include "common.h"

namespace sparsekern::bindings {

namespace {

using bsr::BlockSparseView;

/// A 1-D contiguous int32 index array on `device` (or null for None).
const std::int32_t* index_array(const nb::object& obj, const char* name, Device device,
                                std::int64_t expected_len, Held& held) {
  if (obj.is_none()) return nullptr;
  const AnyArray& a = hold(held, obj);
  const nb::dlpack::dtype t = a.dtype();
  if (!(t.code == uint8_t(nb::dlpack::dtype_code::Int) && t.bits == 32 && t.lanes == 1))
    throw TypeMismatch(std::string("`") + name + "` must be an int32 tensor");
  if (device_of(a, name) != device)
    throw InvalidArgument(std::string("`") + name + "` must be on the device of `values`");
  if (a.ndim() != 1 || std::int64_t(a.shape(0)) != expected_len)
    throw InvalidArgument(std::string("`") + name + "` must be 1-D with " +
                          std::to_string(expected_len) + " entries; got " +
                          (a.ndim() == 1 ? std::to_string(a.shape(0)) + " entries"
                                         : std::to_string(a.ndim()) + "-D"));
  if (a.shape(0) > 1 && a.stride(0) != 1)
    throw InvalidArgument(std::string("`") + name + "` must be contiguous");
  return static_cast<const std::int32_t*>(a.data());
}

/// The sparse operand: values (nnz, b, b) contiguous, plus its index sets.
BlockSparseView sparse_view(const AnyArray& values, std::int64_t rows, std::int64_t cols,
                            std::int64_t block, const nb::object& row_offsets,
                            const nb::object& col_indices, const nb::object& row_indices,
                            const nb::object& col_offsets, const nb::object& rows_by_col,
                            const nb::object& blocks_by_col, DType* dtype, Device* device, Held& held) {
  *dtype = dtype_of(values, "values");
  *device = device_of(values, "values");
  if (values.ndim() != 3 || std::int64_t(values.shape(1)) != block ||
      std::int64_t(values.shape(2)) != block)
    throw InvalidArgument("`values` must be (nnz_blocks, " + std::to_string(block) + ", " +
                          std::to_string(block) + ")");
  const std::int64_t nnz = std::int64_t(values.shape(0));
  if (nnz > 0 && !(values.stride(2) == 1 && values.stride(1) == block &&
                   (nnz == 1 || values.stride(0) == block * block)))
    throw InvalidArgument("`values` must be contiguous");
  BlockSparseView s;
  s.rows = rows;
  s.cols = cols;
  s.block_size = block;
  s.nnz_blocks = nnz;
  s.values = values.data();
  const std::int64_t rb = block > 0 ? rows / block : 0, cb = block > 0 ? cols / block : 0;
  s.block_row_offsets = index_array(row_offsets, "block_row_offsets", *device, rb + 1, held);
  s.block_col_indices = index_array(col_indices, "block_col_indices", *device, nnz, held);
  s.block_row_indices = index_array(row_indices, "block_row_indices", *device, nnz, held);
  s.block_col_offsets = index_array(col_offsets, "block_col_offsets", *device, cb + 1, held);
  s.block_rows_by_col = index_array(rows_by_col, "block_rows_by_col", *device, nnz, held);
  s.blocks_by_col = index_array(blocks_by_col, "blocks_by_col", *device, nnz, held);
  return s;
}

void check_same(const AnyArray& a, const char* name, DType dtype, Device device) {
  if (dtype_of(a, name) != dtype)
    throw TypeMismatch(std::string("`") + name + "` must have the dtype of `values` (" +
                       dtype_name(dtype) + "); got " + dtype_name(dtype_of(a, name)));
  if (device_of(a, name) != device)
    throw InvalidArgument(std::string("`") + name + "` must be on the device of `values`");
}

MatrixView matrix2d(const AnyArray& a, const char* name) {
  if (a.ndim() != 2)
    throw InvalidArgument("`" + std::string(name) + "` must be 2-D; got " + std::to_string(a.ndim()) + "-D");
  return matrix_of(a, name).view;
}

dense::Fp32Math math(bool allow_tf32) { return allow_tf32 ? dense::Fp32Math::tf32 : dense::Fp32Math::ieee; }

void dds(const InArray& a_in, const InArray& values_in, std::int64_t rows, std::int64_t cols,
         std::int64_t block, const nb::object& row_offsets, const nb::object& col_indices,
         const nb::object& col_offsets, const nb::object& rows_by_col,
         const nb::object& blocks_by_col, bool transpose, const nb::object& bias,
         const nb::object& out_obj, bool allow_tf32, std::uintptr_t stream, std::uintptr_t workspace,
         std::size_t workspace_bytes) {
  const AnyArray a(a_in), values(values_in);
  bsr::DdsParams p;
  Held held;
  const AnyArray out = out_array(out_obj, "out");
  p.s = sparse_view(values, rows, cols, block, row_offsets, col_indices, nb::none(), col_offsets,
                    rows_by_col, blocks_by_col, &p.dtype, &p.device, held);
  check_same(a, "a", p.dtype, p.device);
  check_same(out, "out", p.dtype, p.device);
  check_no_broadcast(out, "out");
  check_no_overlap(out, "out", a, "a");
  check_no_overlap(out, "out", values, "values");
  p.a = matrix2d(a, "a");
  const MatrixView c = matrix2d(out, "out");
  p.c = MutableMatrixView{const_cast<void*>(c.data), c.rows, c.cols, c.row_stride, c.col_stride, 0};
  if (!bias.is_none()) {
    const AnyArray& bv = hold(held, bias);
    check_same(bv, "bias", p.dtype, p.device);
    const std::int64_t n = transpose ? rows : cols;
    if (bv.ndim() != 1 || std::int64_t(bv.shape(0)) != n || (n > 1 && bv.stride(0) != 1))
      throw InvalidArgument("`bias` must be a contiguous 1-D tensor of " + std::to_string(n) + " elements");
    p.bias = bv.data();
  }
  p.transpose_s = transpose;
  p.fp32_math = math(allow_tf32);
  p.workspace = Workspace{reinterpret_cast<void*>(workspace), workspace_bytes};
  nb::gil_scoped_release nogil;  // the kernels touch no Python object (see common.h)
  bsr::dds(p, as_stream(stream));
}

void dsd(const InArray& values_in, std::int64_t rows, std::int64_t cols, std::int64_t block,
         const nb::object& row_offsets, const nb::object& col_indices,
         const nb::object& col_offsets, const nb::object& rows_by_col,
         const nb::object& blocks_by_col, bool transpose, const InArray& b_in, const nb::object& out_obj,
         bool allow_tf32, std::uintptr_t stream) {
  const AnyArray values(values_in), b(b_in);
  bsr::DsdParams p;
  Held held;
  const AnyArray out = out_array(out_obj, "out");
  p.s = sparse_view(values, rows, cols, block, row_offsets, col_indices, nb::none(), col_offsets,
                    rows_by_col, blocks_by_col, &p.dtype, &p.device, held);
  check_same(b, "b", p.dtype, p.device);
  check_same(out, "out", p.dtype, p.device);
  check_no_broadcast(out, "out");
  check_no_overlap(out, "out", b, "b");
  check_no_overlap(out, "out", values, "values");
  p.b = matrix2d(b, "b");
  const MatrixView c = matrix2d(out, "out");
  p.c = MutableMatrixView{const_cast<void*>(c.data), c.rows, c.cols, c.row_stride, c.col_stride, 0};
  p.transpose_s = transpose;
  p.fp32_math = math(allow_tf32);
  nb::gil_scoped_release nogil;  // the kernels touch no Python object (see common.h)
  bsr::dsd(p, as_stream(stream));
}

void sdd(const InArray& a_in, const InArray& b_in, std::int64_t rows, std::int64_t cols,
         std::int64_t block, const nb::object& row_indices, const nb::object& col_indices,
         const nb::object& out_values_obj, bool allow_tf32, std::uintptr_t stream, std::uintptr_t workspace,
         std::size_t workspace_bytes, const nb::object& row_offsets, const nb::object& a_row_sums,
         std::uintptr_t row_sums_workspace, std::size_t row_sums_workspace_bytes) {
  const AnyArray a(a_in), b(b_in);
  bsr::SddParams p;
  Held held;
  const AnyArray out_values = out_array(out_values_obj, "out_values");
  p.pattern = sparse_view(out_values, rows, cols, block, row_offsets, col_indices, row_indices,
                          nb::none(), nb::none(), nb::none(), &p.dtype, &p.device, held);
  p.out_values = const_cast<void*>(p.pattern.values);
  check_same(a, "a", p.dtype, p.device);
  check_same(b, "b", p.dtype, p.device);
  check_no_overlap(out_values, "out_values", a, "a");
  check_no_overlap(out_values, "out_values", b, "b");
  p.a = matrix2d(a, "a");
  p.b = matrix2d(b, "b");
  p.fp32_math = math(allow_tf32);
  p.workspace = Workspace{reinterpret_cast<void*>(workspace), workspace_bytes};
  if (!a_row_sums.is_none()) {
    const AnyArray r = hold_out(held, a_row_sums, "a_row_sums");
    check_same(r, "a_row_sums", p.dtype, p.device);
    check_no_overlap(r, "a_row_sums", a, "a");
    check_no_overlap(r, "a_row_sums", b, "b");
    check_no_overlap(r, "a_row_sums", out_values, "out_values");
    if (r.ndim() != 1 || std::int64_t(r.shape(0)) != rows || (rows > 1 && r.stride(0) != 1))
      throw InvalidArgument("`a_row_sums` must be a contiguous 1-D tensor of " + std::to_string(rows) + " elements");
    if (row_offsets.is_none()) throw InvalidArgument("`a_row_sums` needs `block_row_offsets`");
    p.a_row_sums = r.data();
    p.row_sums_workspace = Workspace{reinterpret_cast<void*>(row_sums_workspace), row_sums_workspace_bytes};
  }
  nb::gil_scoped_release nogil;  // the kernels touch no Python object (see common.h)
  bsr::sdd(p, as_stream(stream));
}

/// The DType whose dtype_name is `dtype`.
DType dtype_named(const std::string& dtype) {
  for (DType t : {DType::f16, DType::bf16, DType::f32, DType::f64}) {
    if (dtype == dtype_name(t)) return t;
  }
  throw InvalidArgument("`dtype` must be float16, bfloat16, float32 or float64; got '" + dtype + "'");
}

/// DdsParams with the fields the workspace queries read: an m-row product of `dtype` (TF32 if
/// `tf32`) with S (rows × cols, nnz blocks of `block`) on CUDA device `device`.
bsr::DdsParams dds_query(std::int64_t nnz, std::int64_t block, bool transpose, bool tf32, int device,
                         std::int64_t rows, std::int64_t cols, std::int64_t m, const std::string& dtype) {
  bsr::DdsParams p;
  p.dtype = dtype_named(dtype);
  p.device = Device{DeviceType::cuda, device};
  p.fp32_math = math(tf32);
  p.transpose_s = transpose;
  p.a.rows = m;
  p.s.nnz_blocks = nnz;
  p.s.block_size = block;
  p.s.rows = rows;
  p.s.cols = cols;
  return p;
}

/// DdsParams::workspace bytes on CUDA device `device` (< 0: the tile counter alone).
std::size_t dds_workspace_bytes(std::int64_t nnz, std::int64_t block, bool transpose, bool tf32, int device,
                                std::int64_t rows, std::int64_t cols, std::int64_t m, const std::string& dtype) {
  if (device < 0) return bsr::kDdsWorkspaceBytes;
  return bsr::dds_workspace_bytes(dds_query(nnz, block, transpose, tf32, device, rows, cols, m, dtype));
}

std::size_t dds_dense_bytes(std::int64_t nnz, std::int64_t block, bool transpose, bool tf32, int device,
                            std::int64_t rows, std::int64_t cols, std::int64_t m, const std::string& dtype) {
  if (device < 0) return 0;
  return bsr::dds_dense_workspace_bytes(dds_query(nnz, block, transpose, tf32, device, rows, cols, m, dtype));
}

/// SddParams with the fields the workspace queries read: a product of an m × k and a k × n operand
/// of `dtype` ("float16", "bfloat16", "float32" (TF32 if `tf32`) or "float64") on CUDA `device`.
bsr::SddParams sdd_query(std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t block, std::int64_t nnz,
                         bool tf32, int device, const std::string& dtype) {
  bsr::SddParams p;
  p.dtype = dtype_named(dtype);
  p.device = Device{DeviceType::cuda, device};
  p.fp32_math = math(tf32);
  p.a.rows = m;
  p.a.cols = k;
  p.b.rows = k;
  p.b.cols = n;
  p.pattern.block_size = block;
  p.pattern.nnz_blocks = nnz;
  return p;
}

std::size_t sdd_workspace_bytes(std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t block,
                                std::int64_t nnz, bool tf32, int device, const std::string& dtype) {
  if (device < 0) return 0;
  return bsr::sdd_workspace_bytes(sdd_query(m, k, n, block, nnz, tf32, device, dtype));
}

std::size_t sdd_split_bytes(std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t block,
                            std::int64_t nnz, bool tf32, int device, const std::string& dtype) {
  if (device < 0) return 0;
  return bsr::sdd_split_workspace_bytes(sdd_query(m, k, n, block, nnz, tf32, device, dtype));
}

std::size_t sdd_row_sums_bytes(std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t block,
                               std::int64_t nnz, bool tf32, int device, const std::string& dtype) {
  if (device < 0) return 0;
  return bsr::sdd_row_sums_workspace_bytes(sdd_query(m, k, n, block, nnz, tf32, device, dtype));
}

bool sdd_row_sums_fused(std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t block, std::int64_t nnz,
                        bool tf32, int device, const std::string& dtype) {
  if (device < 0) return false;
  return bsr::sdd_row_sums_fused(sdd_query(m, k, n, block, nnz, tf32, device, dtype));
}

std::size_t sdd_dense_bytes(std::int64_t m, std::int64_t k, std::int64_t n, std::int64_t block,
                            std::int64_t nnz, bool tf32, int device, const std::string& dtype) {
  if (device < 0) return 0;
  return bsr::sdd_dense_workspace_bytes(sdd_query(m, k, n, block, nnz, tf32, device, dtype));
}

void validate(std::int64_t nnz, std::int64_t rows, std::int64_t cols, std::int64_t block,
              const nb::object& row_offsets, const nb::object& col_indices,
              const nb::object& row_indices, const nb::object& col_offsets,
              const nb::object& rows_by_col, const nb::object& blocks_by_col) {
  if (block <= 0) throw InvalidArgument("`block_size` must be positive; got " + std::to_string(block));
  const Device cpu{DeviceType::cpu, 0};
  Held held;
  BlockSparseView s;
  s.rows = rows;
  s.cols = cols;
  s.block_size = block;
  s.nnz_blocks = nnz;
  s.block_row_offsets = index_array(row_offsets, "block_row_offsets", cpu, rows / block + 1, held);
  s.block_col_indices = index_array(col_indices, "block_col_indices", cpu, nnz, held);
  s.block_row_indices = index_array(row_indices, "block_row_indices", cpu, nnz, held);
  s.block_col_offsets = index_array(col_offsets, "block_col_offsets", cpu, cols / block + 1, held);
  s.block_rows_by_col = index_array(rows_by_col, "block_rows_by_col", cpu, nnz, held);
  s.blocks_by_col = index_array(blocks_by_col, "blocks_by_col", cpu, nnz, held);
  bsr::validate_pattern(s);
}

}  // namespace

void register_bsr(nb::module_& m) {
  m.def("bsr_dds", &dds, nb::arg("a"), nb::arg("values"), nb::arg("rows"), nb::arg("cols"),
        nb::arg("block_size"), nb::arg("block_row_offsets").none(), nb::arg("block_col_indices").none(),
        nb::arg("block_col_offsets").none(), nb::arg("block_rows_by_col").none(),
        nb::arg("blocks_by_col").none(), nb::arg("transpose"), nb::arg("bias").none(),
        nb::arg("out"), nb::arg("allow_tf32") = false, nb::arg("stream") = 0, nb::arg("workspace") = 0,
        nb::arg("workspace_bytes") = 0,
        "out ← a · op(S) (+ bias), S block-sparse (rows × cols), op(S) = Sᵀ if transpose; workspace: "
        "optional device scratch of bsr_dds_workspace_bytes() bytes for the dynamic tile schedule "
        "(one per stream), or of bsr_dds_workspace_bytes(nnz, b, transpose, tf32, device) bytes "
        "for the transposed tf32 blocks as well");
  m.def("bsr_dds_workspace_bytes", &dds_workspace_bytes, nb::arg("nnz_blocks") = 0, nb::arg("block_size") = 0,
        nb::arg("transpose") = true, nb::arg("tf32") = false, nb::arg("device") = -1, nb::arg("rows") = 0,
        nb::arg("cols") = 0, nb::arg("m") = 0, nb::arg("dtype") = "float32",
        "bytes of the optional bsr_dds workspace (see DdsParams::workspace) for an m-row product of "
        "`dtype`: the tile counter, plus the transposed blocks of an fp32 product with TF32 and "
        "op(S) = S (S: rows × cols) on a Hopper `device` where S holds at least 1.5 blocks per block "
        "column, or room for op(S) dense where bsr_dds_dense_bytes says so");
  m.def("bsr_dds_dense_bytes", &dds_dense_bytes, nb::arg("nnz_blocks"), nb::arg("block_size"), nb::arg("transpose"),
        nb::arg("tf32"), nb::arg("device"), nb::arg("rows"), nb::arg("cols"), nb::arg("m"), nb::arg("dtype"),
        "bytes of the bsr_dds workspace with which op(S) is written dense and multiplied with cuBLAS, "
        "0 where the block-sparse kernels run (see DdsParams::workspace)");
  m.def("bsr_sdd_workspace_bytes", &sdd_workspace_bytes, nb::arg("m"), nb::arg("k"), nb::arg("n"),
        nb::arg("block_size"), nb::arg("nnz_blocks"), nb::arg("tf32"), nb::arg("device"),
        nb::arg("dtype") = "float32",
        "bytes of the bsr_sdd workspace for an (m × k)·(k × n) product of `dtype` on a pattern of "
        "nnz_blocks blocks on CUDA `device` (0 where none is used; see SddParams::workspace)");
  m.def("bsr_sdd_split_bytes", &sdd_split_bytes, nb::arg("m"), nb::arg("k"), nb::arg("n"), nb::arg("block_size"),
        nb::arg("nnz_blocks"), nb::arg("tf32"), nb::arg("device"), nb::arg("dtype"),
        "bytes of the bsr_sdd workspace for the split-K partials of the product, 0 where its kernel does "
        "not split K (see SddParams::workspace)");
  m.def("bsr_sdd_dense_bytes", &sdd_dense_bytes, nb::arg("m"), nb::arg("k"), nb::arg("n"), nb::arg("block_size"), nb::arg("nnz_blocks"), nb::arg("tf32"),
        nb::arg("device"), nb::arg("dtype"),
        "bytes of the bsr_sdd workspace with which the product is computed whole (cuBLAS) and the "
        "pattern's blocks copied out of it, 0 where the sampled kernels run (see SddParams::workspace)");
  m.def("bsr_sdd_row_sums_bytes", &sdd_row_sums_bytes, nb::arg("m"), nb::arg("k"), nb::arg("n"),
        nb::arg("block_size"), nb::arg("nnz_blocks"), nb::arg("tf32"), nb::arg("device"), nb::arg("dtype"),
        "bytes of the bsr_sdd row-sums workspace for a_row_sums (see SddParams::a_row_sums)");
  m.def("bsr_sdd_row_sums_fused", &sdd_row_sums_fused, nb::arg("m"), nb::arg("k"), nb::arg("n"),
        nb::arg("block_size"), nb::arg("nnz_blocks"), nb::arg("tf32"), nb::arg("device"), nb::arg("dtype"),
        "whether the kernel of this sdd (weight-gradient layouts, no dense path) sums a's rows itself when "
        "a_row_sums is asked for (else that costs a separate column-sum pass; see SddParams::a_row_sums)");
  m.def("bsr_tf32_wgmma", [](int device, std::int64_t block) {
          return bsr::tf32_wgmma(Device{DeviceType::cuda, device}, block);
        },
        nb::arg("device"), nb::arg("block_size"),
        "whether fp32 (TF32) products with this block size run the sm_90a wgmma kernels on CUDA "
        "`device` (sdd: with `a` row-major and `b` column-major, or on copies in the workspace)");
  m.def("bsr_dsd", &dsd, nb::arg("values"), nb::arg("rows"), nb::arg("cols"), nb::arg("block_size"),
        nb::arg("block_row_offsets").none(), nb::arg("block_col_indices").none(),
        nb::arg("block_col_offsets").none(), nb::arg("block_rows_by_col").none(),
        nb::arg("blocks_by_col").none(), nb::arg("transpose"), nb::arg("b"), nb::arg("out"),
        nb::arg("allow_tf32") = false, nb::arg("stream") = 0,
        "out ← op(S) · b, S block-sparse (rows × cols), op(S) = Sᵀ if transpose");
  m.def("bsr_sdd", &sdd, nb::arg("a"), nb::arg("b"), nb::arg("rows"), nb::arg("cols"),
        nb::arg("block_size"), nb::arg("block_row_indices").none(), nb::arg("block_col_indices").none(),
        nb::arg("out_values"), nb::arg("allow_tf32") = false, nb::arg("stream") = 0, nb::arg("workspace") = 0,
        nb::arg("workspace_bytes") = 0, nb::arg("block_row_offsets").none() = nb::none(),
        nb::arg("a_row_sums").none() = nb::none(), nb::arg("row_sums_workspace") = 0,
        nb::arg("row_sums_workspace_bytes") = 0,
        "out_values[p] ← (a · b)[block p] for each block (block_row_indices[p], block_col_indices[p]); "
        "workspace: optional device scratch of bsr_sdd_workspace_bytes(...) bytes (the dense path's product, "
        "Hopper's tf32 operand copies, or the split-K partials of a product with few blocks); "
        "a_row_sums: optional (rows,) output of Σ_j a[i, j] (a linear layer's bias gradient; needs "
        "block_row_offsets and, on CUDA, row_sums_workspace of bsr_sdd_row_sums_bytes(...) bytes)");
  m.def("bsr_validate", &validate, nb::arg("nnz_blocks"), nb::arg("rows"), nb::arg("cols"),
        nb::arg("block_size"), nb::arg("block_row_offsets").none(), nb::arg("block_col_indices").none(),
        nb::arg("block_row_indices").none(), nb::arg("block_col_offsets").none(),
        nb::arg("block_rows_by_col").none(), nb::arg("blocks_by_col").none(),
        "check the index sets of a block-sparse pattern (CPU int32 arrays); raises ValueError");
}

}  // namespace sparsekern::bindings
