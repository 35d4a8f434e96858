export type ApiEnv = { Bindings: Env; Variables: { tenant: string } };
