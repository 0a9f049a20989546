// A QR code drawn in the page, for the two-factor enrolment of both front ends: the `qr` package
// (pinned in package.json) encodes the text into modules, and React draws them as one SVG path.
// No canvas, no data: URL and no innerHTML, so the apps' CSP needs nothing new, and the secret
// never leaves the browser (no QR service is asked).
import encodeQR from 'qr';

/** The SVG path of the dark modules of `text` (one unit per module, `border` modules of quiet
 * zone), and the size of its square in modules. */
export function qrPath(text: string, border = 4): { d: string; size: number } {
  // Medium error correction: a phone's camera reads it off a screen at any size we draw.
  // `raw` includes the quiet zone (light modules on every side).
  const rows = encodeQR(text, 'raw', { ecc: 'medium', border });
  const parts: string[] = [];
  rows.forEach((row, y) => {
    let x = 0;
    while (x < row.length) {
      if (!row[x]) {
        x += 1;
        continue;
      }
      // A run of dark modules is one rectangle: a short path for a few hundred modules.
      let end = x;
      while (end < row.length && row[end]) end += 1;
      parts.push(`M${x} ${y}h${end - x}v1h-${end - x}z`);
      x = end;
    }
  });
  return { d: parts.join(''), size: rows.length };
}

export function QrCode({ value, label, px = 200 }: { value: string; label: string; px?: number }) {
  const { d, size } = qrPath(value);
  return (
    <svg
      role="img"
      aria-label={label}
      data-testid="qr-code"
      width={px}
      height={px}
      viewBox={`0 0 ${size} ${size}`}
      shapeRendering="crispEdges"
    >
      <rect width={size} height={size} fill="#fff" />
      <path d={d} fill="#000" />
    </svg>
  );
}
