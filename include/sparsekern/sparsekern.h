#pragma once
/// @file sparsekern.h
/// @brief Umbrella header: includes every public sparsekern header.

#include <sparsekern/dense.h>
#include <sparsekern/error.h>
#include <sparsekern/handles.h>
#include <sparsekern/types.h>
