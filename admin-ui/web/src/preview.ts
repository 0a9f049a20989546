// Which files the app can show in the page, and as what. The gateway sends every file body as
// an octet-stream attachment under a sandbox policy (docs/API.md, "Browser safety"), so a
// preview is made in the app's own page from the bytes: a blob of the type the name says,
// shown by an <img>, <video>, <audio>, a PDF frame, or as text in a <pre> (never as HTML).

export type PreviewKind = 'image' | 'video' | 'audio' | 'pdf' | 'text';

const TYPES: Record<string, [PreviewKind, string]> = {
  png: ['image', 'image/png'],
  jpg: ['image', 'image/jpeg'],
  jpeg: ['image', 'image/jpeg'],
  gif: ['image', 'image/gif'],
  webp: ['image', 'image/webp'],
  avif: ['image', 'image/avif'],
  bmp: ['image', 'image/bmp'],
  mp4: ['video', 'video/mp4'],
  m4v: ['video', 'video/mp4'],
  webm: ['video', 'video/webm'],
  ogv: ['video', 'video/ogg'],
  mp3: ['audio', 'audio/mpeg'],
  m4a: ['audio', 'audio/mp4'],
  ogg: ['audio', 'audio/ogg'],
  oga: ['audio', 'audio/ogg'],
  wav: ['audio', 'audio/wav'],
  flac: ['audio', 'audio/flac'],
  pdf: ['pdf', 'application/pdf'],
};

const TEXT = new Set(
  'txt md markdown csv tsv json log xml yml yaml toml ini cfg conf rs ts tsx js jsx mjs py sh bash go java c h cpp hpp cs rb php sql css html htm svg tex diff patch env gitignore'.split(' '),
);

/** How a file of this name is previewed, and the type its blob gets; null: no preview. */
export function previewOf(name: string): { kind: PreviewKind; type: string } | null {
  const dot = name.lastIndexOf('.');
  const ext = dot < 0 ? '' : name.slice(dot + 1).toLowerCase();
  const t = TYPES[ext];
  if (t) return { kind: t[0], type: t[1] };
  // Text of any kind (HTML and SVG too) is shown as text, never rendered.
  if (TEXT.has(ext)) return { kind: 'text', type: 'text/plain' };
  return null;
}

/** Largest file previewed (the bytes are held in the page). */
export const PREVIEW_LIMIT = 200 * 1024 * 1024;
/** Text beyond this is cut (a <pre> of megabytes helps nobody). */
export const TEXT_LIMIT = 1024 * 1024;

/** Formats the gateway makes thumbnails of (docs/API.md, Thumbnails). */
const THUMBNAIL_TYPES = new Set(['png', 'jpg', 'jpeg', 'gif', 'webp']);
/** Largest file the gateway makes a thumbnail of (its `MAX_SOURCE_BYTES`). */
export const THUMBNAIL_SOURCE_LIMIT = 64 * 1024 * 1024;

/** Whether a listing asks the gateway for a thumbnail of this file. */
export function hasThumbnail(name: string, size: number): boolean {
  const dot = name.lastIndexOf('.');
  const ext = dot < 0 ? '' : name.slice(dot + 1).toLowerCase();
  return THUMBNAIL_TYPES.has(ext) && size > 0 && size <= THUMBNAIL_SOURCE_LIMIT;
}
