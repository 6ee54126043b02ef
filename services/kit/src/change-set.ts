import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import type { EntityManager } from "@mikro-orm/postgresql";
import type { Orm } from "./db.js";
import { buildEvent, type EventContext } from "./events.js";
import type { Logger } from "./logger.js";
import { enqueueEvents, type OutboxEntry, type OutboxRelay } from "./outbox.js";
import type { Principal } from "./principal.js";

/**
 * Who is calling and for which request; events carry both. The principal is absent when a
 * service acts on its own (a deletion saga, a purge job): its events then name the system.
 */
export interface CallContext {
  principal: Principal | undefined;
  requestId: string;
}

/** A call with a verified principal. */
export interface Call extends CallContext {
  principal: Principal;
}

/** A step to take once the change has committed. */
export type AfterCommitStep = () => Promise<void> | void;

/**
 * What one transaction changes besides its rows: events written to the outbox, published if and
 * only if the transaction commits; steps to take once it has committed (wake a collector, mark
 * cache entries); and undos of what other services did for it, run when it is abandoned. A
 * service extends it with its own audit events and cache marks.
 */
export class ChangeSet {
  /** Events this change has added; the outbox relay is woken after the commit when any were. */
  protected events = 0;
  /** The events this change has written to the outbox, for the relay to hold (`written`). */
  private readonly writtenEntries: OutboxEntry[] = [];
  private readonly committedSteps: AfterCommitStep[] = [];
  private readonly undos: (() => Promise<void>)[] = [];

  constructor(
    readonly em: EntityManager,
    readonly context: CallContext,
  ) {}

  get enqueuedEvents(): number {
    return this.events;
  }

  /** Writes an event with its `meta` to the outbox in this transaction; answers what it wrote. */
  async publish<D extends DescMessage>(
    subject: string,
    schema: D,
    init: Omit<MessageShape<D>, "$typeName" | "meta">,
  ): Promise<OutboxEntry> {
    const entry = buildEvent(subject, schema, init, this.eventContext());
    await enqueueEvents(this.em, [entry]);
    this.events += 1;
    this.written(entry);
    return entry;
  }

  /**
   * Notes events this change wrote to the outbox (or hands to a statement that writes them): once
   * it has committed, the relay publishes them from memory instead of reading them back.
   */
  protected written(...entries: readonly OutboxEntry[]): void {
    this.writtenEntries.push(...entries);
  }

  /** The events noted as written (`written`), in order. */
  get writtenEvents(): readonly OutboxEntry[] {
    return this.writtenEntries;
  }

  protected eventContext(): EventContext {
    return {
      ...(this.context.principal ? { principal: this.context.principal } : {}),
      requestId: this.context.requestId,
    };
  }

  /**
   * Takes `step` once the change has committed, after the steps added before it. The change is
   * committed by then, so a step that fails is logged and does not fail the call: a step must
   * only do what something else would also do later (a cache entry expires, a collector runs on
   * a timer).
   */
  afterCommit(step: AfterCommitStep): void {
    this.committedSteps.push(step);
  }

  /**
   * Runs `undo` when the work fails after this point and its transaction rolls back, best
   * effort: for a step another service took that holds something for the change until its
   * event arrives. Undos run last added first; one that fails is logged.
   */
  onAbandon(undo: () => Promise<void>): void {
    this.undos.push(undo);
  }

  /**
   * Runs in the transaction once the work is done, before the commit: a service's change set
   * writes what it gathered during the work (buffered events, raised versions). A throw rolls
   * the change back as the work's own would.
   */
  async beforeCommit(): Promise<void> {}

  /** The steps to take after the commit, in the order they were added. */
  stepsAfterCommit(): readonly AfterCommitStep[] {
    return this.committedSteps;
  }

  /** The undos to run after a rollback, last added first. */
  undosOnAbandon(): readonly (() => Promise<void>)[] {
    return [...this.undos].reverse();
  }
}

/** What `work` returned in another owner's transaction, and what to do once that committed. */
export interface Within<T> {
  result: T;
  afterCommit: () => Promise<void>;
}

/**
 * Runs write transactions with a change set: after a commit it wakes the outbox relay when
 * events were written and takes the change set's after-commit steps; after a rollback it takes
 * none of them and runs the undos. Only a rollback caused by the work runs the undos: a commit
 * that fails may still have committed, and its events would then need what the undos remove.
 */
export class Transactions<C extends ChangeSet = ChangeSet> {
  constructor(
    private readonly orm: Orm,
    private readonly relay: Pick<OutboxRelay, "kick">,
    readonly logger: Logger,
    /** The change set of one transaction (a service's subclass). */
    protected readonly open: (em: EntityManager, context: CallContext) => C,
  ) {}

  /** A fresh EntityManager for reads outside a transaction. */
  em(): EntityManager {
    return this.orm.em.fork();
  }

  /** Runs `work` in a transaction of its own and returns what it returned once committed. */
  async run<T>(context: CallContext, work: (changes: C) => Promise<T>): Promise<T> {
    let changes: C | undefined;
    let failed = false;
    try {
      const result = await this.orm.em.fork().transactional(async (em) => {
        changes = this.open(em, context);
        try {
          return await this.finish(changes, work);
        } catch (error) {
          failed = true;
          throw error;
        }
      });
      if (changes) await this.committed(changes);
      return result;
    } catch (error) {
      // After the rollback, so that no undo waits on a lock the transaction still held.
      if (failed && changes) await this.abandoned(changes);
      throw error;
    }
  }

  /**
   * Runs `work` in a transaction another owner commits (a `consumeOnce` handler's): returns its
   * result and what to do once that transaction has committed (what `run` does after its
   * commit). A throw runs the undos at once and reaches the owner, whose transaction then rolls
   * back.
   */
  async within<T>(
    em: EntityManager,
    context: CallContext,
    work: (changes: C) => Promise<T>,
  ): Promise<Within<T>> {
    const changes = this.open(em, context);
    let result: T;
    try {
      result = await this.finish(changes, work);
    } catch (error) {
      await this.abandoned(changes);
      throw error;
    }
    return { result, afterCommit: () => this.committed(changes) };
  }

  /** The work, then the change set's last writes, in the transaction. */
  private async finish<T>(changes: C, work: (changes: C) => Promise<T>): Promise<T> {
    const result = await work(changes);
    await changes.beforeCommit();
    return result;
  }

  /**
   * What follows the commit of `changes`: the relay is woken with the events written, then each
   * step is taken.
   */
  protected async committed(changes: C): Promise<void> {
    if (changes.enqueuedEvents > 0) this.relay.kick(changes.writtenEvents);
    for (const step of changes.stepsAfterCommit()) {
      try {
        await step();
      } catch (error) {
        this.logger.warn({ err: error }, "a step after a commit failed");
      }
    }
  }

  private async abandoned(changes: C): Promise<void> {
    for (const undo of changes.undosOnAbandon()) {
      try {
        await undo();
      } catch (error) {
        this.logger.warn({ err: error }, "an undo of an abandoned change failed");
      }
    }
  }
}
