// Gives a precompiled-header-only target one translation unit to compile.
