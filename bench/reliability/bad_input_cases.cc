// AllBadInputCases and StageName.
#include "bench/reliability/bad_input_cases.h"

#include <iterator>

namespace quant::reliability {

const char* StageName(Stage stage) {
  switch (stage) {
    case Stage::kUploadCalibration:
      return "UploadCalibration";
    case Stage::kCreateJob:
      return "CreateJob";
    case Stage::kQuantctl:
      return "quantctl";
    case Stage::kJob:
      return "job";
  }
  return "?";
}

std::vector<BadInputCase> AllBadInputCases() {
  std::vector<BadInputCase> all;
  for (std::vector<BadInputCase> group :
       {CheckpointCases(), CalibrationCases(), RecipeCases(), ProbeCases()}) {
    all.insert(all.end(), std::make_move_iterator(group.begin()),
               std::make_move_iterator(group.end()));
  }
  return all;
}

}  // namespace quant::reliability
