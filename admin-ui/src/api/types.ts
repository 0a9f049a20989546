// Shapes of the gateway's JSON (proto/src/wire.rs).
export type Role = 'user' | 'admin';

export interface UserInfo {
  id: number;
  username: string;
  role: Role;
  quota_bytes: number | null;
  used_bytes: number;
  disabled: boolean;
  created: string;
}
export interface CreatedUser extends UserInfo {
  generated_password?: string | null;
}
export interface UserList {
  users: UserInfo[];
  next_cursor: string | null;
}
export interface Me {
  id: number;
  username: string;
  role: Role;
  quota_bytes: number | null;
  used_bytes: number;
}
export interface LoginResponse {
  token: string;
  expires_at: string;
  user: { id: number; username: string };
}
export interface AuditEntry {
  id: number;
  at: string;
  actor: string | null;
  action: string;
  target: string | null;
  detail: string | null;
  ip: string | null;
}
export interface AuditList {
  entries: AuditEntry[];
  next_cursor: string | null;
}
export type CacheStats = Record<string, number | boolean | string | null>;
export interface WarmJob {
  id: string;
  user_id: number;
  path: string;
  state: 'listing' | 'warming' | 'done' | 'failed';
  files_total: number;
  files_done: number;
  bytes_total: number;
  bytes_done: number;
  error: string | null;
}
export interface UserUsage {
  id: number;
  username: string;
  used_bytes: number;
  quota_bytes: number | null;
}
export interface UsageSummary {
  users: number;
  active_users: number;
  total_bytes: number;
  files: number;
  top_users: UserUsage[];
}
