// A LangGraph.js checkpointer fenced by the lease's epoch: a stale run of a
// graph (an owner whose lease was lost, or an older epoch of the same task)
// cannot overwrite the newer owner's state.
//
// FencedCheckpointSaver wraps any saver (MemorySaver, SqliteSaver,
// PostgresSaver, ...) and admits every write (put, putWrites,
// deleteThread) through an EpochFence before it reaches the inner saver:
//   - MemoryEpochFence keeps the highest epoch seen per thread, as a
//     downstream's fence keeps max_seen, and refuses a lower one
//     (StaleEpochError); admission and the write are one step per thread.
//   - LeaseEpochFence asks the lease: refused once it is lost or when the
//     write's epoch is not the lease's, and each write is a progress mark
//     the sidecar refuses (409) when its lease is not current.
// Reads are not fenced. Imports @langchain/langgraph-checkpoint (a peer
// dependency); the SDK's main entry does not.

import {
  BaseCheckpointSaver,
  type ChannelVersions,
  type Checkpoint,
  type CheckpointListOptions,
  type CheckpointMetadata,
  type CheckpointTuple,
  type PendingWrite,
} from "@langchain/langgraph-checkpoint";
import type { RunnableConfig } from "@langchain/core/runnables";
import { ControlError } from "./errors.js";
import { NotFoundError, StaleEpochError } from "./errors_gen.js";
import type { Lease } from "./lease.js";

/** Decides whether a write under epoch may change threadId's state. */
export interface EpochFence {
  /** Resolve to admit; reject (StaleEpochError, LeaseLostError) to refuse. */
  admit(threadId: string, epoch: number): Promise<void>;
}

/** The highest epoch seen per thread, in this process; a lower one is refused. */
export class MemoryEpochFence implements EpochFence {
  private readonly maxSeen = new Map<string, number>();

  async admit(threadId: string, epoch: number): Promise<void> {
    const seen = this.maxSeen.get(threadId) ?? 0;
    if (epoch < seen) {
      throw new StaleEpochError({ code: StaleEpochError.code, status: 409, epoch: seen,
        detail: `thread ${JSON.stringify(threadId)}: epoch ${epoch} is below ${seen}, the newest owner's` });
    }
    this.maxSeen.set(threadId, epoch);
  }
}

/** Admits writes while the lease is current, each one a progress mark. */
export class LeaseEpochFence implements EpochFence {
  private progress = true;

  constructor(private readonly lease: Lease) {}

  async admit(threadId: string, epoch: number): Promise<void> {
    this.lease.check();
    if (epoch !== this.lease.epoch) {
      throw new StaleEpochError({ code: StaleEpochError.code, status: 409, epoch: this.lease.epoch,
        detail: `thread ${JSON.stringify(threadId)}: epoch ${epoch} is not the lease's ${this.lease.epoch}` });
    }
    if (!this.progress) return;
    try {
      await this.lease.progress();
    } catch (e) {
      // A sidecar from before POST /v1/progress: the lease's own state alone.
      if (e instanceof NotFoundError) this.progress = false;
      else throw e;
    }
  }
}

function threadOf(config: RunnableConfig): string {
  const t = config.configurable?.thread_id;
  if (t === undefined || t === null || t === "") throw new ControlError({ code: "bad-request", detail: "config.configurable.thread_id is required" }, false);
  return String(t);
}

/** A checkpointer whose writes pass an EpochFence first. */
export class FencedCheckpointSaver extends BaseCheckpointSaver {
  private readonly chains = new Map<string, Promise<unknown>>();

  /**
   * @param inner the saver that stores checkpoints
   * @param fence admits each write
   * @param epoch the epoch of this run's writes (e.g. () => lease.epoch)
   */
  constructor(readonly inner: BaseCheckpointSaver, readonly fence: EpochFence, readonly epoch: () => number) {
    super(inner.serde);
  }

  /** Admission and the write as one step per thread, so a newer epoch cannot slip between them. */
  private fenced<T>(threadId: string, write: () => Promise<T>): Promise<T> {
    const run = (this.chains.get(threadId) ?? Promise.resolve()).then(async () => {
      await this.fence.admit(threadId, this.epoch());
      return write();
    });
    const tail = run.catch(() => undefined);
    this.chains.set(threadId, tail);
    void tail.then(() => {
      if (this.chains.get(threadId) === tail) this.chains.delete(threadId);
    });
    return run;
  }

  // Channel values are stored as deltas, as the upstream contract asks (a
  // checkpoint keeps only the channels newVersions names): put stores
  // those, and a read fills every other channel the checkpoint's
  // channel_versions lists from the nearest ancestor that stored it.

  async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const t = await this.inner.getTuple(config);
    return t && this.full(t);
  }

  async *list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple> {
    for await (const t of this.inner.list(config, options)) yield await this.full(t);
  }

  put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const delta: Record<string, unknown> = {};
    for (const ch of Object.keys(newVersions)) {
      if (ch in checkpoint.channel_values) delta[ch] = checkpoint.channel_values[ch];
    }
    const stored = { ...checkpoint, channel_values: delta };
    return this.fenced(threadOf(config), () => this.inner.put(config, stored, metadata, newVersions));
  }

  private async full(t: CheckpointTuple): Promise<CheckpointTuple> {
    const values: Record<string, unknown> = { ...t.checkpoint.channel_values };
    let missing = Object.keys(t.checkpoint.channel_versions ?? {}).filter((ch) => !(ch in values));
    for (let parent = t.parentConfig; missing.length > 0 && parent; ) {
      const p = await this.inner.getTuple(parent);
      if (!p) break;
      for (const ch of missing) if (ch in p.checkpoint.channel_values) values[ch] = p.checkpoint.channel_values[ch];
      missing = missing.filter((ch) => !(ch in values));
      parent = p.parentConfig;
    }
    return { ...t, checkpoint: { ...t.checkpoint, channel_values: values } };
  }

  putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    return this.fenced(threadOf(config), () => this.inner.putWrites(config, writes, taskId, taskPath));
  }

  deleteThread(threadId: string): Promise<void> {
    return this.fenced(threadId, () => this.inner.deleteThread(threadId));
  }

  getNextVersion(current: number | undefined): number {
    return this.inner.getNextVersion(current);
  }

}

/** A saver over inner fenced by lease: its writes carry lease.epoch and stop with the lease. */
export function fencedSaver(inner: BaseCheckpointSaver, lease: Lease): FencedCheckpointSaver {
  return new FencedCheckpointSaver(inner, new LeaseEpochFence(lease), () => lease.epoch);
}
