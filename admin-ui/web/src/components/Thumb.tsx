// The small picture before a name in a listing: the gateway's thumbnail of an image file
// (GET /api/v1/thumbnails/{path}), else an icon of the entry's kind. The thumbnail needs the
// bearer token, which never goes into a URL, so it is fetched with it once the row comes into
// view and shown from an object URL; the browser keeps the answer (Cache-Control: private) and
// revalidates it with its ETag (304). Any failure shows the icon.
import { useEffect, useRef, useState } from 'react';
import { request } from '../../../src/api/client';
import type { Entry } from '../../../src/api/types';
import { apiUrl } from '../paths';
import { hasThumbnail } from '../preview';

/** The box asked for: twice the shown size, sharp on high-density screens. */
const SIZE = 64;
const SHOWN = 32;

export function Thumb({ entry }: { entry: Entry }) {
  const box = useRef<HTMLSpanElement>(null);
  const [url, setUrl] = useState<string | null>(null);
  const [visible, setVisible] = useState(false);
  const wanted = entry.kind === 'file' && hasThumbnail(entry.name, entry.size);

  useEffect(() => {
    if (!wanted || visible) return;
    const el = box.current;
    if (!el || typeof IntersectionObserver === 'undefined') {
      setVisible(true);
      return;
    }
    const io = new IntersectionObserver((seen) => {
      if (seen.some((s) => s.isIntersecting)) {
        setVisible(true);
        io.disconnect();
      }
    }, { rootMargin: '200px' });
    io.observe(el);
    return () => io.disconnect();
  }, [wanted, visible]);

  useEffect(() => {
    if (!wanted || !visible) return;
    const ctl = new AbortController();
    let made: string | null = null;
    request('GET', `${apiUrl('thumbnails', entry.path)}?size=${SIZE}`, { signal: ctl.signal })
      .then((r) => r.blob())
      .then((b) => {
        if (ctl.signal.aborted) return;
        made = URL.createObjectURL(b);
        setUrl(made);
      })
      .catch(() => setUrl(null));
    return () => {
      ctl.abort();
      if (made) URL.revokeObjectURL(made);
      setUrl(null);
    };
    // A new version of the file is a new thumbnail.
  }, [wanted, visible, entry.path, entry.version]);

  return (
    <span
      ref={box}
      aria-hidden
      style={{ display: 'inline-flex', width: SHOWN, height: SHOWN, flex: 'none', alignItems: 'center', justifyContent: 'center', marginRight: 8, verticalAlign: 'middle' }}
    >
      {url ? (
        <img
          src={url}
          alt=""
          loading="lazy"
          data-thumbnail={entry.name}
          width={SHOWN}
          height={SHOWN}
          style={{ objectFit: 'contain', borderRadius: 3 }}
          onError={() => setUrl(null)}
        />
      ) : (
        <KindIcon kind={entry.kind} />
      )}
    </span>
  );
}

/** A folder or a page with a folded corner, drawn inline (no icon font, no emoji font needed). */
function KindIcon({ kind }: { kind: Entry['kind'] }) {
  const common = { width: 22, height: 22, viewBox: '0 0 24 24', fill: 'none', strokeWidth: 1.6, strokeLinejoin: 'round' as const };
  return kind === 'dir' ? (
    <svg data-icon="dir" {...common} stroke="#1c7ed6">
      <path d="M3 6.5A1.5 1.5 0 0 1 4.5 5h4.2l2 2.2h8.8A1.5 1.5 0 0 1 21 8.7v9.8a1.5 1.5 0 0 1-1.5 1.5h-15A1.5 1.5 0 0 1 3 18.5z" fill="#d0ebff" />
    </svg>
  ) : (
    <svg data-icon="file" {...common} stroke="#868e96">
      <path d="M6 3h8l4 4v13a1 1 0 0 1-1 1H6a1 1 0 0 1-1-1V4a1 1 0 0 1 1-1z" fill="#f8f9fa" />
      <path d="M14 3v4h4" />
    </svg>
  );
}
