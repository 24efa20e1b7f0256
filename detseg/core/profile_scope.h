// Implements: DETSEG_PROFILE_SCOPE, a named phase of the training step for train.profile's table
// (engine/step_profiler.h). It is torch's RECORD_USER_SCOPE: nothing measurable when no profiler runs.
#pragma once

#include <ATen/record_function.h>

#define DETSEG_PROFILE_SCOPE(name) RECORD_USER_SCOPE(name)
