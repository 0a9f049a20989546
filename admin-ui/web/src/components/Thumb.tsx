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
      style={{ display: 'inline-flex', width: SHOWN, height: SHOWN, flex: 'none', alignItems: 'center', justifyContent: 'center', marginRight: 8, verticalAlign: 'middle', fontSize: 20, lineHeight: 1 }}
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
        <span data-icon={entry.kind}>{entry.kind === 'dir' ? '📁' : '📄'}</span>
      )}
    </span>
  );
}
