// Implements: detseg's CPU tensor allocator: LibTorch's default allocator, with every buffer of
// 4 MiB and more advised as transparent huge pages (madvise MADV_HUGEPAGE) on its whole 2 MiB pages.
//
// Why: glibc serves large buffers with fresh mmaps, and each first touch of a 4 KiB page is a page
// fault. On the VMs measured here the faults were about a third of Faster R-CNN's train step and
// inference time (docs/benchmarks.md, "Page faults, huge pages and the mask head"). A 2 MiB page takes one fault
// where 4 KiB pages take 512. Peak memory measured the same: buffers are still freed to glibc, and
// only touched pages are resident. Kernels with THP "never" ignore the advice.
#pragma once

namespace detseg {

// Installs the allocator for CPU tensors (oneDNN's buffers included: LibTorch routes them through
// the same allocator). Idempotent. DETSEG_HUGE_PAGES=0 leaves LibTorch's default in place.
// Returns whether detseg's allocator is in use.
bool use_huge_page_allocator();

}  // namespace detseg
