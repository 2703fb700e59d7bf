// config/render.h
//
// Text forms of the registry and of an EnvSnapshot, for the `neuronx-env`
// command and docs/CONFIG.md (the daemon's GetConfig builds its own
// ConfigResponse from the registry and is rendered by neffctl):
//   - RenderTable:    aligned NAME / VALUE / ORIGIN / NOTE table;
//   - RenderJson:     {"variables": {"NAME": {"value": <typed>, "origin":
//                     "...", "note": "..."}}, "warnings": ["..."]}, keys
//                     sorted, values typed (bool, number, string, list, or
//                     null when unset), "note" only when there is one;
//   - RenderExplain:  one variable: the spec's description and its value;
//   - RenderMarkdown: docs/CONFIG.md. Depends on the registry only, never on
//                     the environment, so the committed doc can be checked.
// Pure functions; thread-safe.

#ifndef NEFFD_CONFIG_RENDER_H_
#define NEFFD_CONFIG_RENDER_H_

#include <string>

#include "absl/status/statusor.h"
#include "config/env.h"

namespace neffd::config {

std::string RenderTable(const EnvSnapshot& snapshot);

// Fails only if protobuf's JSON printer does (an internal error).
absl::StatusOr<std::string> RenderJson(const EnvSnapshot& snapshot);

std::string RenderExplain(const EnvSnapshot& snapshot, const VarSpec& spec);

std::string RenderMarkdown();

}  // namespace neffd::config

#endif  // NEFFD_CONFIG_RENDER_H_
