#pragma once
/// @file sparsekern.h
/// @brief Umbrella header: includes every public sparsekern header.

#include <sparsekern/bsr.h>
#include <sparsekern/csr.h>
#include <sparsekern/dense.h>
#include <sparsekern/error.h>
#include <sparsekern/handles.h>
#include <sparsekern/inplace.h>
#include <sparsekern/kron.h>
#include <sparsekern/semi.h>
#include <sparsekern/types.h>
