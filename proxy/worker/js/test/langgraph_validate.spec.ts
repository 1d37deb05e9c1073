// The upstream @langchain/langgraph-checkpoint-validation suite, unmodified,
// against FencedCheckpointSaver over MemorySaver, run by vitest with globals, as upstream runs it (the suite
// own runner; its validate-checkpointer CLI cannot load an initializer in
// this release: its runner imports a findPackageRoot that import_utils.js
// does not export):
//   node_modules/.bin/vitest run --globals --dir dist/js/test langgraph_validate.spec
import { MemorySaver } from "@langchain/langgraph-checkpoint";
import { validate, type CheckpointSaverTestInitializer } from "@langchain/langgraph-checkpoint-validation";
import { FencedCheckpointSaver, MemoryEpochFence } from "../src/langgraph.js";

export const initializer: CheckpointSaverTestInitializer<FencedCheckpointSaver> = {
  checkpointerName: "fencepost FencedCheckpointSaver(MemorySaver)",
  createCheckpointer: () => new FencedCheckpointSaver(new MemorySaver(), new MemoryEpochFence(), () => 1),
};

validate(initializer);
