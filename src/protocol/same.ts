/**
 * Compile-time drift guards: a schema of a type owned elsewhere (core/, a Durable Object's module)
 * is held equal to it, so `npm run typecheck` fails when one changes without the other.
 */

/** true when each of A and B is assignable to the other. */
export type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;

/** Compiles only when its type argument is `true`: `same<Same<A, B>>(true)`. Does nothing at run time. */
export function same<T extends true>(_holds: T): void {}
