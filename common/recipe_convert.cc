// quant.v1.Recipe <-> quant::Recipe, field by field.
#include "common/recipe_convert.h"

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/recipe/recipe_validation.h"

namespace quant::common {
namespace {

absl::Status UnknownEnum(const std::string& field, int value) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": unknown enum value ", value));
}

// nullopt for UNSPECIFIED.
absl::StatusOr<std::optional<QuantMethod>> MethodFromProto(
    v1::Method method, const std::string& field) {
  switch (method) {
    case v1::METHOD_UNSPECIFIED:
      return std::optional<QuantMethod>();
    case v1::METHOD_RTN:
      return QuantMethod::kRtn;
    case v1::METHOD_GPTQ:
      return QuantMethod::kGptq;
    case v1::METHOD_AWQ:
      return QuantMethod::kAwq;
    default:
      return UnknownEnum(field, method);
  }
}

absl::StatusOr<std::optional<QuantGrid>> GridFromProto(
    v1::Grid grid, const std::string& field) {
  switch (grid) {
    case v1::GRID_UNSPECIFIED:
      return std::optional<QuantGrid>();
    case v1::GRID_SYM:
      return QuantGrid::kSym;
    case v1::GRID_SYM_RESTRICTED:
      return QuantGrid::kSymRestricted;
    case v1::GRID_ASYM:
      return QuantGrid::kAsym;
    default:
      return UnknownEnum(field, grid);
  }
}

v1::Method MethodToProto(QuantMethod method) {
  switch (method) {
    case QuantMethod::kRtn:
      return v1::METHOD_RTN;
    case QuantMethod::kGptq:
      return v1::METHOD_GPTQ;
    case QuantMethod::kAwq:
      return v1::METHOD_AWQ;
  }
  return v1::METHOD_UNSPECIFIED;
}

v1::Grid GridToProto(QuantGrid grid) {
  switch (grid) {
    case QuantGrid::kSym:
      return v1::GRID_SYM;
    case QuantGrid::kSymRestricted:
      return v1::GRID_SYM_RESTRICTED;
    case QuantGrid::kAsym:
      return v1::GRID_ASYM;
  }
  return v1::GRID_UNSPECIFIED;
}

absl::Status CalibrationFromProto(const v1::CalibrationSplit& proto,
                                  CalibrationSettings* out) {
  out->samples = proto.samples();
  out->seq_len = proto.seq_len();
  out->heldout_fraction = proto.heldout_fraction();
  out->heldout_count = proto.heldout_count();
  out->heldout_samples = proto.heldout_samples();
  out->seed = proto.seed();
  out->chat_template =
      proto.chat_template().empty() ? "auto" : proto.chat_template();
  if (proto.has_system_prompt()) out->system_prompt = proto.system_prompt();
  out->add_generation_prompt = proto.add_generation_prompt();
  out->sources.clear();
  for (const v1::CalibrationSource& source : proto.sources()) {
    out->sources.push_back({source.file(), source.sha256(), source.weight()});
  }
  switch (proto.packing()) {
    case v1::CALIBRATION_PACKING_UNSPECIFIED:
      break;
    case v1::CALIBRATION_PACKING_CONCATENATE:
      out->packing = CalibrationPacking::kConcatenate;
      break;
    case v1::CALIBRATION_PACKING_PER_DOCUMENT:
      out->packing = CalibrationPacking::kPerDocument;
      break;
    default:
      return UnknownEnum("recipe.calibration.packing", proto.packing());
  }
  return absl::OkStatus();
}

absl::StatusOr<LayerOverride> OverrideFromProto(const v1::LayerOverride& proto,
                                                const std::string& field) {
  LayerOverride out;
  out.match = proto.match();
  if (proto.has_bits()) out.bits = proto.bits();
  if (proto.has_group_size()) out.group_size = proto.group_size();
  auto method = MethodFromProto(proto.method(), field + ".method");
  if (!method.ok()) return method.status();
  out.method = *method;
  auto grid = GridFromProto(proto.grid(), field + ".grid");
  if (!grid.ok()) return grid.status();
  out.grid = *grid;
  if (proto.has_damp()) {
    const v1::Damping& damp = proto.damp();
    if (damp.auto_grid_size() > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field,
                       ".damp.auto_grid: only the recipe's damp has a grid "
                       "(set recipe.damp.auto_grid)"));
    }
    DampValue value;
    if (damp.kind_case() == v1::Damping::kAutomatic) {
      value.automatic = damp.automatic();
    } else if (damp.kind_case() == v1::Damping::kFraction) {
      value.fraction = damp.fraction();
    }
    out.damp = value;
  }
  out.keep_unquantized = proto.keep_unquantized();
  return out;
}

}  // namespace

absl::StatusOr<Recipe> RecipeFromProto(const v1::Recipe& proto) {
  Recipe recipe;
  auto method = MethodFromProto(proto.method(), "recipe.method");
  if (!method.ok()) return method.status();
  if (method->has_value()) recipe.method = **method;
  recipe.bits = proto.bits();
  recipe.group_size = proto.group_size();
  auto grid = GridFromProto(proto.grid(), "recipe.grid");
  if (!grid.ok()) return grid.status();
  if (grid->has_value()) recipe.grid = **grid;
  if (proto.has_damp()) {
    const v1::Damping& damp = proto.damp();
    if (damp.kind_case() == v1::Damping::kAutomatic) {
      recipe.damp.automatic = damp.automatic();
    } else if (damp.kind_case() == v1::Damping::kFraction) {
      recipe.damp.fraction = damp.fraction();
    }
    if (damp.auto_grid_size() > 0) {
      recipe.damp.auto_grid.assign(damp.auto_grid().begin(),
                                   damp.auto_grid().end());
    }
  }
  recipe.act_order = proto.act_order();
  recipe.static_groups = proto.static_groups();
  switch (proto.propagation()) {
    case v1::PROPAGATION_UNSPECIFIED:
      break;
    case v1::PROPAGATION_SEQUENTIAL:
      recipe.propagation = Propagation::kSequential;
      break;
    case v1::PROPAGATION_INDEPENDENT:
      recipe.propagation = Propagation::kIndependent;
      break;
    default:
      return UnknownEnum("recipe.propagation", proto.propagation());
  }
  if (proto.has_calibration()) {
    if (absl::Status s =
            CalibrationFromProto(proto.calibration(), &recipe.calibration);
        !s.ok()) {
      return s;
    }
  }
  recipe.ignore.assign(proto.ignore().begin(), proto.ignore().end());
  for (int i = 0; i < proto.overrides_size(); ++i) {
    auto layer = OverrideFromProto(proto.overrides(i),
                                   absl::StrCat("recipe.overrides[", i, "]"));
    if (!layer.ok()) return layer.status();
    recipe.overrides.push_back(*std::move(layer));
  }
  if (proto.has_gates()) {
    const v1::Gates& gates = proto.gates();
    if (gates.has_max_ppl_ratio()) {
      recipe.gates.max_ppl_ratio = gates.max_ppl_ratio();
    }
    if (gates.has_max_mean_kl()) recipe.gates.max_mean_kl = gates.max_mean_kl();
    if (gates.has_min_top1_agreement()) {
      recipe.gates.min_top1_agreement = gates.min_top1_agreement();
    }
    recipe.gates.compare_to = gates.compare_to();
    if (gates.has_max_ppl_ratio_vs_previous()) {
      recipe.gates.max_ppl_ratio_vs_previous =
          gates.max_ppl_ratio_vs_previous();
    }
    recipe.gates.tasks = gates.tasks();
    if (gates.has_min_task_accuracy_ratio()) {
      recipe.gates.min_task_accuracy_ratio = gates.min_task_accuracy_ratio();
    }
    if (gates.has_max_starved_experts()) {
      recipe.gates.max_starved_experts = gates.max_starved_experts();
    }
    recipe.gates.runtime = gates.runtime();
  }
  switch (proto.format()) {
    case v1::OUTPUT_FORMAT_UNSPECIFIED:
      break;
    case v1::OUTPUT_FORMAT_GPTQ:
      recipe.format = OutputFormat::kGptq;
      break;
    case v1::OUTPUT_FORMAT_COMPRESSED_TENSORS:
      recipe.format = OutputFormat::kCompressedTensors;
      break;
    default:
      return UnknownEnum("recipe.format", proto.format());
  }
  if (proto.awq_alpha_grid_size() > 0) {
    recipe.awq_alpha_grid.assign(proto.awq_alpha_grid().begin(),
                                 proto.awq_alpha_grid().end());
  }
  recipe.awq_clip_search = proto.awq_clip_search();
  if (proto.has_mixed_precision()) {
    const v1::MixedPrecision& m = proto.mixed_precision();
    MixedPrecision mixed;
    mixed.average_bits = m.average_bits();
    mixed.bits.assign(m.bits().begin(), m.bits().end());
    mixed.group_sizes.assign(m.group_sizes().begin(), m.group_sizes().end());
    mixed.keep_float = m.keep_float();
    recipe.mixed_precision = std::move(mixed);
  }
  if (proto.has_moe()) {
    const v1::MoeCalibration& m = proto.moe();
    MoeCalibration moe;
    switch (m.routing()) {
      case v1::EXPERT_ROUTING_UNSPECIFIED:
      case v1::EXPERT_ROUTING_NATURAL:
        moe.routing = ExpertRouting::kNatural;
        break;
      case v1::EXPERT_ROUTING_ALL_EXPERTS:
        moe.routing = ExpertRouting::kAllExperts;
        break;
      default:
        return UnknownEnum("recipe.moe.routing", m.routing());
    }
    moe.min_tokens_per_expert = m.min_tokens_per_expert();
    switch (m.on_starved_expert()) {
      case v1::STARVED_EXPERT_ACTION_UNSPECIFIED:
      case v1::STARVED_EXPERT_ACTION_RTN:
        moe.on_starved_expert = StarvedExpertAction::kRtn;
        break;
      case v1::STARVED_EXPERT_ACTION_DAMP:
        moe.on_starved_expert = StarvedExpertAction::kDamp;
        break;
      case v1::STARVED_EXPERT_ACTION_FAIL:
        moe.on_starved_expert = StarvedExpertAction::kFail;
        break;
      default:
        return UnknownEnum("recipe.moe.on_starved_expert",
                           m.on_starved_expert());
    }
    recipe.moe = moe;
  }
  if (std::optional<RecipeFieldError> error = FindRecipeError(recipe)) {
    return absl::InvalidArgumentError(
        absl::StrCat("recipe.", error->path, ": ", error->problem));
  }
  return recipe;
}

v1::Recipe RecipeToProto(const Recipe& recipe) {
  v1::Recipe proto;
  proto.set_method(MethodToProto(recipe.method));
  proto.set_bits(recipe.bits);
  proto.set_group_size(recipe.group_size);
  proto.set_grid(GridToProto(recipe.grid));
  v1::Damping* damp = proto.mutable_damp();
  if (recipe.damp.automatic) {
    damp->set_automatic(true);
  } else {
    damp->set_fraction(recipe.damp.fraction);
  }
  for (double value : recipe.damp.auto_grid) damp->add_auto_grid(value);
  proto.set_act_order(recipe.act_order);
  proto.set_static_groups(recipe.static_groups);
  proto.set_propagation(recipe.propagation == Propagation::kSequential
                            ? v1::PROPAGATION_SEQUENTIAL
                            : v1::PROPAGATION_INDEPENDENT);
  v1::CalibrationSplit* calibration = proto.mutable_calibration();
  calibration->set_samples(recipe.calibration.samples);
  calibration->set_seq_len(recipe.calibration.seq_len);
  calibration->set_heldout_fraction(recipe.calibration.heldout_fraction);
  calibration->set_heldout_count(recipe.calibration.heldout_count);
  calibration->set_heldout_samples(recipe.calibration.heldout_samples);
  calibration->set_seed(recipe.calibration.seed);
  calibration->set_packing(recipe.calibration.packing ==
                                   CalibrationPacking::kConcatenate
                               ? v1::CALIBRATION_PACKING_CONCATENATE
                               : v1::CALIBRATION_PACKING_PER_DOCUMENT);
  calibration->set_chat_template(recipe.calibration.chat_template);
  if (recipe.calibration.system_prompt.has_value()) {
    calibration->set_system_prompt(*recipe.calibration.system_prompt);
  }
  calibration->set_add_generation_prompt(
      recipe.calibration.add_generation_prompt);
  for (const CalibrationSource& source : recipe.calibration.sources) {
    v1::CalibrationSource* entry = calibration->add_sources();
    entry->set_file(source.file);
    entry->set_sha256(source.sha256);
    entry->set_weight(source.weight);
  }
  for (const std::string& pattern : recipe.ignore) proto.add_ignore(pattern);
  for (const LayerOverride& layer : recipe.overrides) {
    v1::LayerOverride* out = proto.add_overrides();
    out->set_match(layer.match);
    if (layer.bits) out->set_bits(*layer.bits);
    if (layer.group_size) out->set_group_size(*layer.group_size);
    if (layer.method) out->set_method(MethodToProto(*layer.method));
    if (layer.grid) out->set_grid(GridToProto(*layer.grid));
    if (layer.damp) {
      if (layer.damp->automatic) {
        out->mutable_damp()->set_automatic(true);
      } else {
        out->mutable_damp()->set_fraction(layer.damp->fraction);
      }
    }
    out->set_keep_unquantized(layer.keep_unquantized);
  }
  v1::Gates* gates = proto.mutable_gates();
  if (recipe.gates.max_ppl_ratio) {
    gates->set_max_ppl_ratio(*recipe.gates.max_ppl_ratio);
  }
  if (recipe.gates.max_mean_kl)
    gates->set_max_mean_kl(*recipe.gates.max_mean_kl);
  if (recipe.gates.min_top1_agreement) {
    gates->set_min_top1_agreement(*recipe.gates.min_top1_agreement);
  }
  gates->set_compare_to(recipe.gates.compare_to);
  if (recipe.gates.max_ppl_ratio_vs_previous) {
    gates->set_max_ppl_ratio_vs_previous(
        *recipe.gates.max_ppl_ratio_vs_previous);
  }
  gates->set_tasks(recipe.gates.tasks);
  if (recipe.gates.min_task_accuracy_ratio) {
    gates->set_min_task_accuracy_ratio(*recipe.gates.min_task_accuracy_ratio);
  }
  if (recipe.gates.max_starved_experts) {
    gates->set_max_starved_experts(*recipe.gates.max_starved_experts);
  }
  gates->set_runtime(recipe.gates.runtime);
  proto.set_format(recipe.format == OutputFormat::kGptq
                       ? v1::OUTPUT_FORMAT_GPTQ
                       : v1::OUTPUT_FORMAT_COMPRESSED_TENSORS);
  for (double value : recipe.awq_alpha_grid) proto.add_awq_alpha_grid(value);
  proto.set_awq_clip_search(recipe.awq_clip_search);
  if (recipe.mixed_precision.has_value()) {
    const MixedPrecision& m = *recipe.mixed_precision;
    v1::MixedPrecision* mixed = proto.mutable_mixed_precision();
    mixed->set_average_bits(m.average_bits);
    for (int b : m.bits) mixed->add_bits(b);
    for (int g : m.group_sizes) mixed->add_group_sizes(g);
    mixed->set_keep_float(m.keep_float);
  }
  if (recipe.moe.has_value()) {
    v1::MoeCalibration* moe = proto.mutable_moe();
    moe->set_routing(recipe.moe->routing == ExpertRouting::kNatural
                         ? v1::EXPERT_ROUTING_NATURAL
                         : v1::EXPERT_ROUTING_ALL_EXPERTS);
    moe->set_min_tokens_per_expert(recipe.moe->min_tokens_per_expert);
    switch (recipe.moe->on_starved_expert) {
      case StarvedExpertAction::kRtn:
        moe->set_on_starved_expert(v1::STARVED_EXPERT_ACTION_RTN);
        break;
      case StarvedExpertAction::kDamp:
        moe->set_on_starved_expert(v1::STARVED_EXPERT_ACTION_DAMP);
        break;
      case StarvedExpertAction::kFail:
        moe->set_on_starved_expert(v1::STARVED_EXPERT_ACTION_FAIL);
        break;
    }
  }
  return proto;
}

}  // namespace quant::common
