// Version compatibility (seed 000 §6.5): a MAJOR mismatch is incompatible;
// a MINOR difference takes the lower version as the baseline; a PATCH
// difference is fully compatible.

export interface SemVer {
  major: number;
  minor: number;
  patch: number;
}

const SEMVER = /^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:[-+].*)?$/;

export function parseSemVer(text: string): SemVer | undefined {
  const match = SEMVER.exec(text.trim());
  if (match === null) return undefined;
  return { major: Number(match[1]), minor: Number(match[2]), patch: Number(match[3]) };
}

export function formatSemVer(version: SemVer): string {
  return `${version.major}.${version.minor}.${version.patch}`;
}

export type VersionComparison =
  | { compatible: true; negotiated: string }
  | { compatible: false; reason: string };

/** undefined when either side is not a semantic version. */
export function compareVersions(ours: string, theirs: string): VersionComparison | undefined {
  const a = parseSemVer(ours);
  const b = parseSemVer(theirs);
  if (a === undefined || b === undefined) return undefined;
  if (a.major !== b.major) {
    return { compatible: false, reason: `major versions differ: ${formatSemVer(a)} and ${formatSemVer(b)}` };
  }
  // The lower minor is the baseline; within it, patch levels are compatible,
  // so the lower of the two full versions is what both sides can speak.
  const lower = a.minor !== b.minor ? (a.minor < b.minor ? a : b) : a.patch <= b.patch ? a : b;
  return { compatible: true, negotiated: formatSemVer(lower) };
}
