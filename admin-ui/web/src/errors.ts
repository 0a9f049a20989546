// Errors in words a user understands: what happened and what to do, from the API's code.
import { ApiError } from '../../src/api/client';

export function describeError(e: unknown, online: boolean = navigator.onLine): string {
  if (!(e instanceof ApiError)) return e instanceof Error ? e.message : String(e);
  const detail = e.message ? ` (${e.message})` : '';
  switch (e.code) {
    case 'network':
      return online
        ? 'The server cannot be reached. Check your connection and try again.'
        : 'You are offline. Reconnect and try again.';
    case 'quota_exceeded':
      return 'There is not enough room in your storage. Empty the trash or delete files you no longer need, or ask your administrator for more space.';
    case 'locked':
      return 'Someone is editing this item right now (it is locked, for example by an office app). Try again when they are done.';
    case 'conflict':
      return `It changed or moved while you were working on it. Reload the folder and try again${detail}.`;
    case 'precondition_failed':
      return 'It changed in the meantime. Reload the folder and try again.';
    case 'already_exists':
      return 'Something with that name is already there. Choose another name.';
    case 'forbidden':
      return `You are not allowed to do that here (a share may be read-only)${detail}.`;
    case 'not_found':
      return 'It is not there any more: someone may have moved or deleted it. Reload the folder.';
    case 'invalid_name':
    case 'invalid_path':
      return `That name cannot be used${detail}.`;
    case 'totp_setup_required':
      return 'Your administrator requires two-factor sign-in: turn it on under Security first.';
    case 'unauthorized':
      return 'Your session has ended. Please sign in again.';
    case 'too_many_requests':
      return 'Too many attempts. Wait a minute and try again.';
    case 'payload_too_large':
      return 'That is too large to send in one piece.';
    case 'store_unavailable':
      return 'The storage is not answering right now. Try again in a few minutes.';
    case 'internal':
      return 'Something went wrong on the server. Try again; if it keeps happening, tell your administrator.';
    default:
      return e.message || `The server answered ${e.status}.`;
  }
}
