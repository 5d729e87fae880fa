{%- extends 'course_base.tpl' -%}
{#- One row per student with the outcome; nbgrader's autograde and feedback columns are gone (course.js drops
    their cells): the course's commands do those steps. -#}
{%- set page = 'assignments' -%}
{%- block page_head -%}
<script>
var assignment_id = {{ assignment_id | tojson }};
</script>
<script src="{{ base_url }}/formgrader/static/js/manage_submissions.js"></script>
{%- endblock -%}
{%- block title -%}
提交
{%- endblock -%}
{%- block breadcrumbs -%}
<ol class="breadcrumb">
  <li><a href="{{ base_url }}/formgrader/manage_assignments">作业</a></li>
  <li class="active">{{ assignment_id }}</li>
</ol>
{%- endblock -%}
{%- block messages -%}
<p class="alert alert-info" id="course-steps">每名学生一行，状态与 <code>course report</code>、<code>course export</code> 中的相同。
重新评分与反馈用课程命令：<code>course grade</code>、<code>course feedback</code>（见 README）。</p>
{%- endblock -%}
{%- block table_header -%}
<tr>
  <th>姓名</th>
  <th class="text-center">学号</th>
  <th class="text-center">提交时间</th>
  <th class="text-center">状态</th>
  <th class="text-center">得分</th>
</tr>
{%- endblock -%}
{%- block table_body -%}
<tr><td colspan="5">正在载入……</td></tr>
{%- endblock -%}
