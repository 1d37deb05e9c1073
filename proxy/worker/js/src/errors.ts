// The SDK's error base classes; errors_gen.ts (generated from the shared
// error table) adds one class per problem code.

/** A problem+json body of the control API. */
export interface ProblemBody {
  code: string;
  status?: number;
  title?: string;
  detail?: string;
  epoch?: number;
  tasks?: string[];
}

/** Every error this SDK throws. */
export class FencepostError extends Error {}

/** A control API refusal: code, status and whether the same call may succeed later. */
export class ControlError extends FencepostError {
  readonly code: string;
  readonly status: number;
  readonly title: string;
  readonly detail: string;
  readonly epoch: number;
  readonly tasks: string[];
  readonly retryable: boolean;
  constructor(p: ProblemBody, retryable: boolean) {
    const status = p.status ?? 0;
    super(`fencepost: ${p.code}${status ? ` (${status})` : ""}${p.detail || p.title ? ": " + (p.detail || p.title) : ""}`);
    this.name = "ControlError";
    this.code = p.code;
    this.status = status;
    this.title = p.title ?? "";
    this.detail = p.detail ?? "";
    this.epoch = p.epoch ?? 0;
    this.tasks = p.tasks ?? [];
    this.retryable = retryable;
  }
}

/** The lease (this epoch) is over: stop the work. Thrown for a stop event on the
 * attach stream and for every refusal whose code means the lease is gone. */
export class LeaseLostError extends ControlError {
  constructor(p: ProblemBody, retryable = false) {
    super(p, retryable);
    this.name = "LeaseLostError";
  }
}
