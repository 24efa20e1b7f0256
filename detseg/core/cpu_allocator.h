// Implements: huge pages for large CPU tensors, through LibTorch's own switch. LibTorch 2.x's default
// CPU allocator aligns every buffer of 2 MiB and more to 2 MiB and advises it as transparent huge
// pages (madvise MADV_HUGEPAGE) when THP_MEM_ALLOC_ENABLE=1; detseg turns that on.
//
// Why: glibc serves large buffers with fresh mmaps, and each first touch of a 4 KiB page is a page
// fault. On the VMs measured here the faults were about a third of Faster R-CNN's train step and
// inference time (docs/benchmarks.md, "Page faults, huge pages and the mask head"). A 2 MiB page takes
// one fault where 4 KiB pages take 512. Kernels with THP "never" ignore the advice.
#pragma once

namespace detseg {

// Sets THP_MEM_ALLOC_ENABLE=1 (unless the user set it) before the first large allocation; LibTorch
// reads it once. DETSEG_HUGE_PAGES=0 leaves LibTorch's default (no advice). Idempotent. Returns whether
// huge pages were asked for.
bool use_huge_page_allocator();

}  // namespace detseg
