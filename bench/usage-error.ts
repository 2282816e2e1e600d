// A benchmark invocation the arguments parser refuses (the runner prints it with the usage text).
export class BenchUsageError extends Error {}
