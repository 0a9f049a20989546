import { decodeQR } from 'qr/decode.js';
import { describe, expect, it } from 'vitest';
import { qrPath } from './QrCode';

/** Paints the path's rectangles (`Mx yhWv1h-Wz`) into grey pixels, `scale` per module, as a
 * camera would see the drawn code, and reads it back with the package's own decoder. */
function scan(text: string, scale = 4): string {
  const { d, size } = qrPath(text);
  const w = size * scale;
  const px = new Uint8Array(w * w * 3).fill(255);
  for (const m of d.matchAll(/M(\d+) (\d+)h(\d+)v1h-\d+z/g)) {
    const [x, y, n] = [Number(m[1]), Number(m[2]), Number(m[3])];
    for (let yy = y * scale; yy < (y + 1) * scale; yy++)
      for (let xx = x * scale; xx < (x + n) * scale; xx++) px.fill(0, (yy * w + xx) * 3, (yy * w + xx) * 3 + 3);
  }
  return decodeQR({ width: w, height: w, data: px }, { format: 'RGB' });
}

describe('qrPath', () => {
  it('draws a code that reads back as the otpauth link, quiet zone included', () => {
    const url = 'otpauth://totp/Nimbus:ann?secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&issuer=Nimbus&algorithm=SHA1&digits=6&period=30';
    expect(scan(url)).toBe(url);
    const { d, size } = qrPath(url);
    // Nothing is drawn inside the four modules of quiet zone.
    for (const m of d.matchAll(/M(\d+) (\d+)h(\d+)/g)) {
      expect(Number(m[1])).toBeGreaterThanOrEqual(4);
      expect(Number(m[2])).toBeGreaterThanOrEqual(4);
      expect(Number(m[1]) + Number(m[3])).toBeLessThanOrEqual(size - 4);
    }
  });

  it('reads back names with spaces and non-ASCII letters', () => {
    const url = 'otpauth://totp/Nimbus:J%C3%BCrgen%20M?secret=ABCDEFGHIJKLMNOP&issuer=Nimbus';
    expect(scan(url)).toBe(url);
  });
});
